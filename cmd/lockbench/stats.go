package main

import (
	"fmt"
	"slices"
	"time"
)

// summary is a latency distribution, in milliseconds.
type summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"meanMs"`
	P50  float64 `json:"p50Ms"`
	P90  float64 `json:"p90Ms"`
	P99  float64 `json:"p99Ms"`
	Max  float64 `json:"maxMs"`
}

func summarize(d []time.Duration) summary {
	if len(d) == 0 {
		return summary{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	ms := func(v time.Duration) float64 { return float64(v) / float64(time.Millisecond) }
	at := func(q float64) float64 { return ms(d[min(len(d)-1, int(q*float64(len(d))))]) }
	return summary{N: len(d), Mean: ms(sum / time.Duration(len(d))), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(d[len(d)-1])}
}

func (s summary) String() string {
	if s.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %.2f ms  p99 %.2f ms  max %.2f ms  mean %.2f ms  (n=%d)", s.P50, s.P99, s.Max, s.Mean, s.N)
}

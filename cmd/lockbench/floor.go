package main

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// floorResult is what this machine needs, without any hub, to write one small message
// to each of many loopback TCP sockets and read it at the other end, from one process:
// the floor under any fan-out's claim-to-event latency here.
type floorResult struct {
	Sockets  int     `json:"sockets"`
	TotalMs  float64 `json:"totalMs"` // median of the rounds: first write to last read
	PerFrame float64 `json:"perFrameUs"`
}

// floorRounds are measured; the median is reported.
const floorRounds = 5

// measureFloor opens n loopback TCP pairs and times the fan-out of one 300-byte write
// to all of them, a goroutine per write as the hub does, until every reader has it.
func measureFloor(ctx context.Context, n int) (floorResult, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return floorResult{}, err
	}
	defer ln.Close()
	servers := make([]net.Conn, 0, n)
	clients := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range append(servers, clients...) {
			_ = c.Close()
		}
	}()
	for range n {
		if ctx.Err() != nil {
			return floorResult{}, ctx.Err()
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return floorResult{}, err
		}
		clients = append(clients, c)
		s, err := ln.Accept()
		if err != nil {
			return floorResult{}, err
		}
		servers = append(servers, s)
	}
	msg := make([]byte, 300) // about a lock event
	var rounds []time.Duration
	for range floorRounds {
		var readers, writers sync.WaitGroup
		var failed error
		var mu sync.Mutex
		for _, c := range clients {
			readers.Go(func() {
				buf := make([]byte, len(msg))
				if _, err := io.ReadFull(c, buf); err != nil {
					mu.Lock()
					failed = errors.Join(failed, err)
					mu.Unlock()
				}
			})
		}
		start := time.Now()
		for _, s := range servers {
			writers.Go(func() { _, _ = s.Write(msg) }) // a failed write shows as a failed read
		}
		writers.Wait()
		readers.Wait()
		rounds = append(rounds, time.Since(start))
		if failed != nil {
			return floorResult{}, failed
		}
	}
	slices.Sort(rounds)
	med := rounds[len(rounds)/2]
	return floorResult{
		Sockets:  n,
		TotalMs:  float64(med) / float64(time.Millisecond),
		PerFrame: float64(med) / float64(time.Microsecond) / float64(n),
	}, nil
}

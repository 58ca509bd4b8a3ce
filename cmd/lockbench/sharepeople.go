package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// The people of -mode share (share.go): the small tenant's, who claim and release and
// whose latency is measured, and the big tenant's, who send every request the limits
// allow; each group runs in a child process of its own (or, in a test, on goroutines
// of this one).

// smallClaims has smallPeople of cl's tenant each claim and release an entity of their
// own every smallPairEvery for d, and returns every claim's latency and how many of the
// claims and releases failed open (answered unknown: Redis did not answer in time, and
// locking was off for them). After each pair a person also times the two round trips a
// claim is made of, each doing no lockhub work: a ping to the hub, which the hub answers
// without Redis, and an EXISTS of a key in the tenant's slot straight to Redis (rdb), on
// the shard the claim's script runs on. Under the same load they show what the machine
// and Redis's queue alone add to a round trip (smallResult).
func smallClaims(ctx context.Context, cl *client, rdb redis.UniversalClient, d time.Duration) (smallResult, error) {
	var mu sync.Mutex
	var res smallResult
	var wg sync.WaitGroup
	errs := make([]error, smallPeople)
	probeKey := "lockbench:{" + cl.tenant + "}:probe" // never written: EXISTS answers 0
	for i := range smallPeople {
		wg.Go(func() {
			oid := fmt.Sprintf("u-small-%d", i)
			tok, err := cl.token(ctx, oid)
			if err != nil {
				errs[i] = err
				return
			}
			c, err := cl.open(ctx, tok)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			// People do not click in step: their pairs are spread over the period.
			select {
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			case <-time.After(smallPairEvery * time.Duration(i) / smallPeople):
			}
			t := time.NewTicker(smallPairEvery)
			defer t.Stop()
			uid := "s-" + oid
			for end := time.Now().Add(d); time.Now().Before(end); {
				start := time.Now()
				r, err := c.Claim(ctx, cl.typ, uid)
				took := time.Since(start)
				failed := r.Outcome == protocol.OutcomeUnknown
				if err != nil || (r.Outcome != protocol.OutcomeAcquired && r.Outcome != protocol.OutcomeRenewed && !failed) { // renewed: after a release that failed open
					errs[i] = fmt.Errorf("small tenant's claim: %s %v", r.Outcome, err)
					return
				}
				r, err = c.Release(ctx, cl.typ, uid)
				if err != nil || (r.Outcome != protocol.OutcomeReleased && r.Outcome != protocol.OutcomeUnknown && r.Outcome != protocol.OutcomeNotHeld) {
					errs[i] = fmt.Errorf("small tenant's release: %s %v", r.Outcome, err)
					return
				}
				start = time.Now()
				if _, err := c.Ping(ctx); err != nil {
					errs[i] = fmt.Errorf("small tenant's ping: %w", err)
					return
				}
				pinged := time.Since(start)
				start = time.Now()
				if err := rdb.Exists(ctx, probeKey).Err(); err != nil {
					errs[i] = fmt.Errorf("small tenant's EXISTS: %w", err)
					return
				}
				probed := time.Since(start)
				mu.Lock()
				res.Latencies = append(res.Latencies, took)
				res.Pings = append(res.Pings, pinged)
				res.Redis = append(res.Redis, probed)
				if failed {
					res.Unknown++
				}
				if r.Outcome == protocol.OutcomeUnknown {
					res.Unknown++
				}
				mu.Unlock()
				select {
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

// smallResult is what the small tenant's people measured (smallClaims), and what its
// process reports (runSmallChild).
type smallResult struct {
	Latencies []time.Duration `json:"latencies"` // of every claim
	Unknown   int             `json:"unknown"`   // claims and releases that failed open
	// Pings and Redis are the round trips without lockhub's work beside each claim: a
	// ping to the hub, an EXISTS straight to Redis.
	Pings []time.Duration `json:"pings"`
	Redis []time.Duration `json:"redis"`
}

// runSmall runs the small tenant's claims for d (smallClaims) in a child process, or, in
// a test (m.clientsInProcess), on goroutines of this one with rdb. Its people are
// browsers on other machines too: in the hub's process their goroutines would wait for
// the hub's turns, and their latency would count the hub's scheduling of its load, not
// the hub's answer.
func (m *Main) runSmall(ctx context.Context, cl *client, rdb redis.UniversalClient, d time.Duration) (smallResult, error) {
	if m.clientsInProcess {
		return smallClaims(ctx, cl, rdb, d)
	}
	exe, err := os.Executable()
	if err != nil {
		return smallResult{}, err
	}
	o := m.opt
	args := []string{"-mode", modeShare, "-child", "-share-small", "-redis-url", o.redisURL,
		"-url", cl.url, "-token-url", cl.tokenURL, "-tenant", cl.tenant, "-type", cl.typ,
		"-share-for", d.String(), "-timeout", o.timeout.String()}
	if o.cluster {
		args = append(args, "-redis-cluster")
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = m.Stderr
	out, err := cmd.Output()
	if err != nil {
		return smallResult{}, fmt.Errorf("the small tenant's process: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r smallResult
			err := json.Unmarshal([]byte(rest), &r)
			return r, err
		}
	}
	return smallResult{}, errors.New("the small tenant's process ended without a result")
}

// runSmallChild is the small tenant's process of -mode share: smallClaims on -tenant at
// -url for -share-for, its EXISTS on -redis-url, then RESULT and what it measured.
func (m *Main) runSmallChild(ctx context.Context) error {
	o := m.opt
	rdb, err := locks.NewClient(o.redisURL, o.cluster)
	if err != nil {
		return err
	}
	defer rdb.Close()
	cl := &client{url: o.url, tokenURL: o.tokenURL, tenant: o.tenant, typ: o.entityType, http: &http.Client{Timeout: 30 * time.Second}}
	defer cl.http.CloseIdleConnections()
	res, err := smallClaims(ctx, cl, rdb, o.shareFor)
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "RESULT %s\n", b)
	return err
}

// loadProcess is the big tenant's load running in a process of its own (see
// startShareLoad).
type loadProcess interface {
	// finish stops the load and adds what its people sent, and what was refused, to res.
	finish(res *shareResult) error
}

// startShareLoad starts the big tenant's people (startLoad) in a child process, or, in a
// test (m.clientsInProcess), on goroutines of this one. The people stand for browsers on
// other machines: in the hub's process their goroutines and their garbage would take
// turns from the hub's, and the small tenant's claims would wait behind the load
// generator rather than behind the hub and Redis, which is what is measured. It returns
// once every person's socket is open.
func (m *Main) startShareLoad(ctx context.Context, cl *client, people int, kinds []string) (loadProcess, error) {
	if m.clientsInProcess {
		l, err := startLoad(ctx, cl, people, kinds)
		if err != nil {
			return nil, err
		}
		return inprocLoad{l}, nil
	}
	o := m.opt
	cmd, in, out, err := m.startChild(ctx, "-mode", modeShare, "-child", "-redis-url", o.redisURL,
		"-url", cl.url, "-token-url", cl.tokenURL, "-tenant", cl.tenant, "-type", cl.typ,
		"-share-people", strconv.Itoa(people), "-share-kinds", strings.Join(kinds, ","), "-timeout", o.timeout.String())
	if err != nil {
		return nil, err
	}
	c := &childLoad{cmd: cmd, in: in, out: bufio.NewScanner(out), rest: out}
	if !c.out.Scan() || c.out.Text() != "READY" {
		_ = in.Close()
		return nil, errors.Join(errors.New("the load's process did not start its people"), c.wait())
	}
	return c, nil
}

// inprocLoad is the load on goroutines of this process.
type inprocLoad struct{ l *shareLoad }

func (p inprocLoad) finish(res *shareResult) error {
	p.l.stop()
	p.l.count(res)
	return nil
}

// childLoad is the load's process: it runs until its stdin ends, then prints RESULT and
// what its people sent as JSON (runShareChild).
type childLoad struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	rest io.Reader
}

func (c *childLoad) finish(res *shareResult) error {
	_ = c.in.Close() // the people stop at EOF
	var err error
	found := false
	for c.out.Scan() {
		if line, ok := strings.CutPrefix(c.out.Text(), "RESULT "); ok {
			var got shareResult
			err = json.Unmarshal([]byte(line), &got)
			for k, v := range got.Requests {
				res.Requests[k] += v
			}
			for k, v := range got.Refused {
				res.Refused[k] += v
			}
			found = true
		}
	}
	if !found && err == nil {
		err = errors.New("the load's process ended without a result")
	}
	return errors.Join(err, c.wait())
}

func (c *childLoad) wait() error {
	_, _ = io.Copy(io.Discard, c.rest)
	return c.cmd.Wait()
}

// runShareChild is the load's process of -mode share: -share-people of -tenant on the
// hub at -url, from READY until its stdin ends; then RESULT and what they sent.
func (m *Main) runShareChild(ctx context.Context) error {
	o := m.opt
	cl := &client{url: o.url, tokenURL: o.tokenURL, tenant: o.tenant, typ: o.entityType, http: &http.Client{Timeout: 30 * time.Second}}
	defer cl.http.CloseIdleConnections()
	l, err := startLoad(ctx, cl, o.sharePeople, o.loadKinds())
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, "READY")
	_, _ = io.Copy(io.Discard, m.Stdin) // until the parent closes it
	l.stop()
	res := shareResult{Requests: map[string]int{}, Refused: map[string]int{}}
	l.count(&res)
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "RESULT %s\n", b)
	return err
}

// shareLoad is the big tenant's people sending what the limits allow.
type shareLoad struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	requests map[string]int
	refused  map[string]int
}

// loadKinds are the requests a big tenant's person sends, in turn.
var loadKinds = []string{"watch", "mine", "adminLocks", "list", "claim"}

// idleKind, alone in -share-kinds, is the run's control: the big tenant's people open
// and authenticate their sockets in every phase under load, as always, and send
// nothing. The two phases of a pair then differ only in which one came first, so the
// ratios of such a run are the harness's own spread on this machine: a ratio of the
// real load is read against them.
const idleKind = "idle"

// parseLoadKinds reads -share-kinds: some of loadKinds, comma-separated, each once, or
// idleKind alone.
func parseLoadKinds(v string) ([]string, error) {
	var kinds []string
	for k := range strings.SplitSeq(v, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k != idleKind && !slices.Contains(loadKinds, k):
			return nil, fmt.Errorf("%q is not one of %s (or %s alone)", k, strings.Join(loadKinds, ","), idleKind)
		case slices.Contains(kinds, k):
			return nil, fmt.Errorf("%q twice", k)
		}
		kinds = append(kinds, k)
	}
	if len(kinds) > 1 && slices.Contains(kinds, idleKind) {
		return nil, fmt.Errorf("%q sends nothing, so it goes alone", idleKind)
	}
	return kinds, nil
}

// loadKinds are the requests the big tenant's people send: -share-kinds, or all.
func (o *options) loadKinds() []string {
	if len(o.shareKinds) == 0 {
		return loadKinds
	}
	return o.shareKinds
}

// startLoad starts people sockets of cl's tenant (each with the admin role, for the
// console's list), each sending the next of loadKinds as soon as the last is answered,
// as fast as the hub's per-socket rate lets them; list goes over HTTP with the
// person's token. Their sockets read answers without decoding them (rawConn).
func startLoad(ctx context.Context, cl *client, people int, kinds []string) (*shareLoad, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &shareLoad{cancel: cancel, requests: map[string]int{}, refused: map[string]int{}}
	for i := range people {
		oid := fmt.Sprintf("u-%d", i) // holders of the locks written: their own, and others'
		tok, err := adminToken(ctx, cl, oid)
		if err != nil {
			l.stop()
			return nil, err
		}
		c, err := rawOpen(ctx, cl, tok)
		if err != nil {
			l.stop()
			return nil, err
		}
		l.wg.Go(func() { l.person(ctx, cl, c, tok, i, kinds) })
	}
	return l, nil
}

// person sends one person's requests until ctx is done, on a new socket when the hub
// closed the last (4429: a snapshot of every lock is more than a slow reader keeps up
// with), as the browser client reconnects.
func (l *shareLoad) person(ctx context.Context, cl *client, c *rawConn, tok string, i int, kinds []string) {
	defer func() { c.Close() }()
	if kinds[0] == idleKind {
		closeAndWait := c.drain() // open, authenticated, silent; the hub's pings answered
		<-ctx.Done()
		closeAndWait()
		return
	}
	typ, _ := json.Marshal(cl.typ) // a string always encodes
	onType := `,"entityType":` + string(typ)
	for n := 0; ctx.Err() == nil; n++ {
		kind := kinds[n%len(kinds)]
		var err error
		switch kind {
		case "watch":
			if err = c.call(ctx, protocol.FrameWatch, onType); err == nil {
				err = c.call(ctx, protocol.FrameUnwatch, onType)
			}
		case "mine":
			err = c.call(ctx, protocol.FrameMine, "")
		case "adminLocks":
			err = c.call(ctx, protocol.FrameAdminLocks, "")
		case "list":
			err = listHTTP(ctx, cl, tok)
		case "claim":
			err = c.call(ctx, protocol.FrameClaim, onType+`,"entityUid":"`+fmt.Sprintf("r-%d", (n*7+i)%maxShareLocks)+`"`)
		}
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		l.requests[kind]++
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			l.refused[string(pe.Code)]++
		case err != nil:
			l.refused["closed"]++
		}
		l.mu.Unlock()
		if err != nil && pe == nil && kind != "list" {
			c.Close()
			if c, err = rawOpen(ctx, cl, tok); err != nil {
				return // ctx done, or the hub is gone: the run reports what it saw
			}
		}
		if pe != nil && pe.Code == protocol.CodeRateLimited {
			select { // the hub's per-socket rate: back off as a client should
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func (l *shareLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

func (l *shareLoad) count(res *shareResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range l.requests {
		res.Requests[k] += v
	}
	for k, v := range l.refused {
		res.Refused[k] += v
	}
}

// adminToken gets a development token with the console's role.
func adminToken(ctx context.Context, cl *client, oid string) (string, error) {
	admin := *cl
	admin.roles = []string{"Locks.Admin"}
	return admin.token(ctx, oid)
}

// listHTTP lists the type's locks over HTTP (GET /api/locks/{type}).
func listHTTP(ctx context.Context, cl *client, tok string) error {
	u := strings.Replace(cl.tokenURL, "/dev/token", "/api/locks/"+cl.typ, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := cl.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return &protocol.Error{Code: protocol.CodeRateLimited}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
}

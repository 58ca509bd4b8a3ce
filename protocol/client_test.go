package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// scriptedHub serves /ws like the hub would, with canned answers:
//
//	auth              welcome (refresh: result refreshed)
//	claim, takeover   result acquired with the lock (takeover of "r-close": close 4403)
//	renew             result renewed, answered in pairs: the second request first
//	release           error not_lockable
//	watch             snapshot, then one event per uid in entityType's suffix ("A:x,y")
//	unwatch           result unwatched
//	mine              result with two locks
//	anything bad      the error DecodeRequest returns
func scriptedHub() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") == "https://evil.example" {
			http.Error(w, `{"code":"forbidden_origin"}`, http.StatusForbidden)
			return
		}
		conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
			Subprotocols:       []string{Subprotocol},
			InsecureSkipVerify: true, // the test's Origin header
		})
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := context.Background() // the handler ends when the client closes
		send := func(v any) {
			b, _ := json.Marshal(v)
			_ = conn.Write(ctx, websocket.MessageText, b) // a failed write ends the next Read
		}
		var held *Result // the answer to the first renew of a pair
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			req, err := DecodeRequest(data)
			if err != nil {
				send(err)
				continue
			}
			l := lockAt(req.EntityUID)
			var answer any
			switch req.Type {
			case FrameAuth:
				answer = Welcome{ConnectionID: "c-1", Tenant: "acme", Holder: l.Holder(), LeaseMs: 300000, RenewMs: 120000,
					ServerTime: l.AcquiredAt, Lockable: []string{"ApprovalRequest"}}
				if req.IsRefresh() {
					answer = Result{ID: req.ID, Outcome: OutcomeRefreshed}
				}
			case FrameClaim, FrameTakeover:
				if req.Type == FrameTakeover && req.EntityUID == "r-close" {
					_ = conn.Close(CloseForbidden, "identity change") // the client sees the code
					return
				}
				answer = Result{ID: req.ID, Outcome: OutcomeAcquired, Lock: &l}
			case FrameRenew:
				r := &Result{ID: req.ID, Outcome: OutcomeRenewed, Lock: &l}
				if held == nil {
					held = r
					continue
				}
				send(r)
				answer, held = held, nil
			case FrameRelease:
				answer = &Error{ID: req.ID, Code: CodeNotLockable, Message: "lockable: ApprovalRequest"}
			case FrameWatch:
				typ, uids, _ := strings.Cut(req.EntityType, ":")
				send(Snapshot{ID: req.ID, EntityType: typ})
				for uid := range strings.SplitSeq(uids, ",") {
					send(LockEvent{Op: OpAcquired, Lock: lockAt(uid), At: l.AcquiredAt})
				}
				continue
			case FrameUnwatch:
				answer = Result{ID: req.ID, Outcome: OutcomeUnwatched}
			case FrameMine:
				answer = Result{ID: req.ID, Locks: []Lock{lockAt("r-1"), lockAt("r-2")}}
			}
			send(answer)
		}
	}))
}

func dialHub(t *testing.T, srv *httptest.Server, opts *DialOptions) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Auth(ctx, "t0k"); err != nil {
		t.Fatalf("Auth: %v", err)
	}
	return c
}

func TestClient(t *testing.T) {
	srv := scriptedHub()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := dialHub(t, srv, &DialOptions{HTTPHeader: http.Header{"Origin": {"https://tms.example.com"}}})

	t.Run("claim", func(t *testing.T) {
		r, err := c.Claim(ctx, "ApprovalRequest", "r-1001")
		if err != nil || r.Outcome != OutcomeAcquired || r.Lock == nil || *r.Lock != lockAt("r-1001") {
			t.Errorf("Claim = %+v, %v", r, err)
		}
	})
	t.Run("answers routed by id", func(t *testing.T) {
		// The hub answers the two renews in the reverse order: each call still gets its own.
		var wg sync.WaitGroup
		for _, uid := range []string{"r-1", "r-2"} {
			wg.Go(func() {
				r, err := c.Renew(ctx, "ApprovalRequest", uid)
				if err != nil || r.Outcome != OutcomeRenewed || r.Lock == nil || r.Lock.EntityUID != uid {
					t.Errorf("Renew(%s) = %+v, %v", uid, r, err)
				}
			})
		}
		wg.Wait()
	})
	t.Run("error frame", func(t *testing.T) {
		_, err := c.Release(ctx, "Invoice", "i-1")
		var fe *Error
		if !errors.As(err, &fe) || fe.Code != CodeNotLockable || fe.ID == "" {
			t.Errorf("Release error = %v, want *Error not_lockable with the id", err)
		}
	})
	t.Run("watch and events", func(t *testing.T) {
		s, err := c.Watch(ctx, "ApprovalRequest:r-1,r-2,r-3")
		if err != nil || s.EntityType != "ApprovalRequest" || s.ID == "" {
			t.Fatalf("Watch = %+v, %v", s, err)
		}
		for _, uid := range []string{"r-1", "r-2", "r-3"} {
			select {
			case ev := <-c.Events():
				if ev.Op != OpAcquired || ev.Lock.EntityUID != uid || ev.Type != FrameLock {
					t.Errorf("event = %+v, want Acquired %s", ev, uid)
				}
			case <-ctx.Done():
				t.Fatal("no event")
			}
		}
		if r, err := c.Unwatch(ctx, "ApprovalRequest"); err != nil || r.Outcome != OutcomeUnwatched {
			t.Errorf("Unwatch = %+v, %v", r, err)
		}
	})
	t.Run("mine", func(t *testing.T) {
		locks, err := c.Mine(ctx)
		if err != nil || len(locks) != 2 || locks[1] != lockAt("r-2") {
			t.Errorf("Mine = %+v, %v", locks, err)
		}
	})
	t.Run("refresh", func(t *testing.T) {
		if r, err := c.Refresh(ctx, "fresh"); err != nil || r.Outcome != OutcomeRefreshed {
			t.Errorf("Refresh = %+v, %v", r, err)
		}
	})
	t.Run("raw frames", func(t *testing.T) {
		for _, raw := range []string{`{"id":"x1","type":"claim"`, `{"id":"x2","type":"claim","entityType":"A"}`} {
			if err := c.SendRaw(ctx, websocket.MessageText, []byte(raw)); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range []Error{
			{Code: CodeBadRequest, Message: "malformed JSON: unexpected end of JSON input at offset 25"},
			{ID: "x2", Code: CodeBadRequest, Message: "missing entityUid"},
		} {
			f, err := c.NextFrame(ctx)
			if err != nil || f.Error == nil || *f.Error != want {
				t.Errorf("NextFrame = %+v, %v; want %+v", f, err, want)
			}
		}
	})

	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Close returned before the reader")
	}
	if got := c.CloseStatus(); got != websocket.StatusNormalClosure {
		t.Errorf("CloseStatus = %v, want 1000", got)
	}
	if _, ok := <-c.Events(); ok {
		t.Error("Events still open after Close")
	}
	if _, err := c.Mine(ctx); err == nil {
		t.Error("Mine after Close succeeded")
	}
	if d := c.Dropped(); d != 0 {
		t.Errorf("Dropped = %d", d)
	}
}

func TestClientServerCloses(t *testing.T) {
	srv := scriptedHub()
	defer srv.Close()
	c := dialHub(t, srv, nil)

	_, err := c.Takeover(t.Context(), "ApprovalRequest", "r-close")
	if got := websocket.CloseStatus(err); got != CloseForbidden {
		t.Errorf("Takeover error = %v, want close status 4403", err)
	}
	<-c.Done()
	if got := c.CloseStatus(); got != CloseForbidden {
		t.Errorf("CloseStatus = %v, want 4403", got)
	}
	if _, err := c.NextFrame(t.Context()); websocket.CloseStatus(err) != CloseForbidden {
		t.Errorf("NextFrame after close = %v, want close status 4403", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after the server closed: %v", err)
	}
}

func TestClientDropsEventsNobodyReads(t *testing.T) {
	srv := scriptedHub()
	defer srv.Close()
	c := dialHub(t, srv, &DialOptions{Buffer: 2})

	if _, err := c.Watch(t.Context(), "ApprovalRequest:r-1,r-2,r-3,r-4,r-5"); err != nil {
		t.Fatal(err)
	}
	// The hub answers in order, so once mine is answered the five events have been read.
	if _, err := c.Mine(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := c.Dropped(); got != 3 {
		t.Errorf("Dropped = %d, want 3", got)
	}
	if ev := <-c.Events(); ev.Lock.EntityUID != "r-1" {
		t.Errorf("first event kept = %s, want r-1", ev.Lock.EntityUID)
	}
}

func TestDialRefused(t *testing.T) {
	srv := scriptedHub()
	defer srv.Close()
	_, err := Dial(t.Context(), srv.URL, &DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	var he *HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusForbidden || !strings.Contains(string(he.Body), "forbidden_origin") {
		t.Errorf("Dial error = %#v, want *HandshakeError 403", err)
	}

	// A server that does not speak lockhub.v1.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		_, _, _ = conn.Read(context.Background()) // until the client closes
	}))
	defer plain.Close()
	if _, err := Dial(t.Context(), plain.URL, nil); err == nil || !strings.Contains(err.Error(), Subprotocol) {
		t.Errorf("Dial without the subprotocol: %v", err)
	}
}

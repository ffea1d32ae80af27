package mcptools_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/mcptools"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// updates connects a client session that sends each resources/updated
// notice it gets to the channel it returns.
func updates(t *testing.T, srv *mcp.Server) (*mcp.ClientSession, <-chan string) {
	t.Helper()
	ch := make(chan string, 16)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { ch <- r.Params.URI },
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, ch
}

func expectUpdate(t *testing.T, ch <-chan string, uri string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != uri {
			t.Fatalf("update of %s, want %s", got, uri)
		}
		// One save may land more than one record: take their notices too.
		for {
			select {
			case <-ch:
				continue
			case <-time.After(200 * time.Millisecond):
			}
			return
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no update of %s within 10 s", uri)
	}
}

// untilUpdate writes (write) until an update of uri comes: under the
// protocol's subscriptions/listen a subscribe returns before the server
// has taken it, so the first writes may come before it.
func untilUpdate(t *testing.T, ch <-chan string, uri string, write func()) {
	t.Helper()
	for range 40 {
		write()
		select {
		case got := <-ch:
			if got != uri {
				t.Fatalf("update of %s, want %s", got, uri)
			}
			drain(ch)
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	t.Fatalf("no update of %s after 40 writes", uri)
}

// drain takes the notices still coming (one write may land more than one
// record).
func drain(ch <-chan string) {
	for {
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

func expectNone(t *testing.T, ch <-chan string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("update of %s after the subscription ended", got)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestResourceSubscriptions: a client subscribed to a session is told
// when a record lands on its thread, and not after it unsubscribed; a
// session that ends takes its subscriptions with it and leaves the other
// sessions' in place.
func TestResourceSubscriptions(t *testing.T) {
	ctx := context.Background()
	c, err := sdk.Open(ctx, sdk.WithDir(t.TempDir()), sdk.WithActor(actor))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv, err := mcptools.New(c, mcptools.Read, mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	save := func(summary string) {
		t.Helper()
		if _, err := c.SaveCheckpoint(ctx, "th_sub", "", records.Checkpoint{Summary: summary, Learnings: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	const uri = "spl://session/th_sub"
	a, updA := updates(t, srv)
	b, updB := updates(t, srv)
	for _, cs := range []*mcp.ClientSession{a, b} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
	}
	untilUpdate(t, updA, uri, func() { save("one") })
	untilUpdate(t, updB, uri, func() { save("one, again") })
	drain(updA)
	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	// Under the protocol's subscriptions/listen, an unsubscribe ends the
	// client's listen request; the server hears of it a moment later.
	time.Sleep(300 * time.Millisecond)
	save("two")
	expectUpdate(t, updB, uri)
	expectNone(t, updA)
	// b ends; a subscribes again: the watch b held is gone, a's is new.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "spl://thread/th_sub"}); err != nil {
		t.Fatal(err)
	}
	untilUpdate(t, updA, "spl://thread/th_sub", func() { save("three") })
}

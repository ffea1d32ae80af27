package mcptools

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/sdk"
)

// Resource subscriptions. A client subscribed to a resource (a thread, a
// session, a checkpoint of a thread) is sent notifications/resources/updated
// whenever a record lands on its thread, then reads it again. One watch of
// the thread's subjects serves every session subscribed to the resource;
// it ends when the last one unsubscribes or ends.

// maxWatched bounds the resources watched at once by one server.
const maxWatched = 4096

// subscriptions are the resources sessions subscribed to.
type subscriptions struct {
	c   *sdk.Client
	srv *mcp.Server

	mu       sync.Mutex
	watched  map[string]*watched                    // by URI
	sessions map[*mcp.ServerSession]map[string]bool // each session's URIs
}

// watched is one resource's watch and its subscribers.
type watched struct {
	stop     func()
	sessions map[*mcp.ServerSession]bool
}

// threadOfURI is the thread of a resource URI of this server.
func threadOfURI(uri string) (string, error) {
	for kind, n := range map[string]int{"thread": 1, "session": 1, "checkpoint": 2} {
		if strings.HasPrefix(uri, "spl://"+kind+"/") {
			p, err := uriParts(uri, kind, n)
			if err != nil {
				return "", err
			}
			return p[0], nil
		}
	}
	return "", mcp.ResourceNotFoundError(uri)
}

// subscribe starts watching the resource's thread for the session.
func (s *subscriptions) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	thread, err := threadOfURI(uri)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watched[uri]
	if w == nil {
		if len(s.watched) >= maxWatched {
			return fmt.Errorf("subscribe %s: this server watches %d resources already, its limit", uri, maxWatched)
		}
		stop, err := s.c.WatchThread(thread, func() {
			_ = s.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
		})
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", uri, err)
		}
		w = &watched{stop: stop, sessions: make(map[*mcp.ServerSession]bool)}
		if s.watched == nil {
			s.watched = make(map[string]*watched)
			s.sessions = make(map[*mcp.ServerSession]map[string]bool)
		}
		s.watched[uri] = w
	}
	w.sessions[req.Session] = true
	if s.sessions[req.Session] == nil {
		s.sessions[req.Session] = make(map[string]bool)
		// A session that ends unsubscribes from everything (the SDK
		// forgets its subscriptions without telling the handler).
		go func(ss *mcp.ServerSession) {
			_ = ss.Wait()
			s.drop(ss, "")
		}(req.Session)
	}
	s.sessions[req.Session][uri] = true
	return nil
}

// unsubscribe stops the session's subscription to the resource.
func (s *subscriptions) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.drop(req.Session, req.Params.URI)
	return nil
}

// drop ends the session's subscription to uri, or to every resource when
// uri is empty, and a watch nobody needs any more.
func (s *subscriptions) drop(ss *mcp.ServerSession, uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	uris := []string{uri}
	if uri == "" {
		uris = uris[:0]
		for u := range s.sessions[ss] {
			uris = append(uris, u)
		}
		delete(s.sessions, ss)
	} else if m := s.sessions[ss]; m != nil {
		delete(m, uri)
	}
	for _, u := range uris {
		w := s.watched[u]
		if w == nil {
			continue
		}
		delete(w.sessions, ss)
		if len(w.sessions) == 0 {
			w.stop()
			delete(s.watched, u)
		}
	}
}

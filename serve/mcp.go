package serve

import (
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/mcptools"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// mcpPath is where the server speaks MCP's streamable HTTP transport.
const mcpPath = "/mcp"

// mcpFaces are the MCP servers of the service layer, by right: built once
// the log is open, the same for every session.
type mcpFaces struct {
	mu          sync.Mutex
	c           *sdk.Client
	read, write *mcp.Server
	// sessions holds the right each session was opened with: a request
	// naming a session must carry a credential of that right at least,
	// so that a read token holding a write session's id writes nothing.
	sessions sync.Map // Mcp-Session-Id → right
}

// server is the MCP server for a new session of r: the read tools for a
// credential of the read right, every tool for the write right (authorize
// let nothing less through). nil (400) before the log is open.
func (s *Server) mcpServer(r *http.Request) *mcp.Server {
	l := s.c.Load()
	if l == nil {
		return nil
	}
	f := &s.mcp
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.c != l {
		read, err := mcptools.New(l, mcptools.Read, mcptools.Options{})
		if err != nil {
			s.logger.Error("mcp: tools", "err", err)
			return nil
		}
		write, err := mcptools.New(l, mcptools.Write, mcptools.Options{})
		if err != nil {
			s.logger.Error("mcp: tools", "err", err)
			return nil
		}
		f.c, f.read, f.write = l, read, write
	}
	if s.cfg.InsecureNoAuth || credentialOf(r.Context()).right >= rightWrite {
		return f.write
	}
	return f.read
}

// mcpRoutes serves MCP at /mcp, behind the same credentials as the rest
// of the API: the tools a session gets are those of its credential's
// right. Idle sessions end after an hour.
func (s *Server) mcpRoutes(mux *http.ServeMux) {
	h := mcp.NewStreamableHTTPHandler(s.mcpServer, &mcp.StreamableHTTPOptions{
		JSONResponse:   true,
		SessionTimeout: time.Hour,
		Logger:         s.logger.With("component", "mcp"),
	})
	mux.Handle(mcpPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		have := credentialOf(r.Context()).right
		if s.cfg.InsecureNoAuth {
			have = rightWrite
		}
		if id := r.Header.Get(mcpSessionHeader); id != "" {
			if opened, ok := s.mcp.sessions.Load(id); ok && have < opened.(right) {
				s.refuse(w, http.StatusForbidden, "forbidden", wire.Error{Error: "mcp: this session was opened with the " + opened.(right).String() +
					" right", Field: "Authorization", Rule: "needs the " + opened.(right).String() + " right"})
				return
			}
		}
		h.ServeHTTP(&mcpSessionWriter{ResponseWriter: w, opened: func(id string) { s.mcp.sessions.LoadOrStore(id, have) }}, r)
		if r.Method == http.MethodDelete {
			s.mcp.sessions.Delete(r.Header.Get(mcpSessionHeader))
		}
	}))
}

// mcpSessionHeader names an MCP session in streamable HTTP.
const mcpSessionHeader = "Mcp-Session-Id"

// mcpSessionWriter notes the session id an answer opens.
type mcpSessionWriter struct {
	http.ResponseWriter
	opened  func(id string)
	started bool
}

func (w *mcpSessionWriter) WriteHeader(code int) {
	if !w.started {
		w.started = true
		if id := w.Header().Get(mcpSessionHeader); id != "" {
			w.opened(id)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *mcpSessionWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (w *mcpSessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

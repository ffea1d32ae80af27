package serve

import (
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/mcptools"
	"github.com/spl-dev/spl/sdk"
)

// mcpPath is where the server speaks MCP's streamable HTTP transport.
const mcpPath = "/mcp"

// mcpFaces are the MCP servers of the service layer, by right: built once
// the log is open, the same for every session.
type mcpFaces struct {
	mu          sync.Mutex
	c           *sdk.Client
	read, write *mcp.Server
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
	mux.Handle(mcpPath, h)
}

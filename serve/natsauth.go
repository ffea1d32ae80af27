package serve

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/sdk"
)

// Rights on the NATS listener.
//
// When the listener's credentials are tokens (the data directory's, or
// Config.Token), a NATS client's token gives it one of three rights, as
// over HTTP. Each is an allow-list: what it names, and nothing else.
//
//	admin-token  everything: the server's own connections, and an
//	             administrator (binding actor keys, repairing a stream)
//	token        reading as the read right does, and writing through the
//	             door alone (door.go): records, erasures and run blobs,
//	             each checked by the service layer. No publish to the
//	             log's subjects, and no JetStream API that changes a
//	             stream, a consumer, a message or a bucket
//	read-token   reading: direct gets of any stream, stream info, and
//	             subscriptions to records as they are published and to
//	             the read models' changes; no publish to any stream and
//	             no JetStream API that changes anything (not even a
//	             consumer: a push consumer's deliver subject would
//	             republish records into another stream)
//
// The server drops a publish that a right does not allow and tells the
// client asynchronously; spl's clients turn that into log.ErrForbidden at
// once (internal/natsio/denied.go). Listeners configured with users, nkeys or a
// nats-server configuration file keep the permissions given there.

// AdminTokenFile is the name of the admin token in the data directory.
const AdminTokenFile = "admin-token"

// readPublish is what the read right may publish: requests that read.
var readPublish = []string{
	"$JS.API.INFO",
	"$JS.API.STREAM.INFO.>",
	"$JS.API.STREAM.NAMES",
	"$JS.API.STREAM.LIST",
	"$JS.API.DIRECT.GET.>",
	"$JS.API.STREAM.MSG.GET.>",
}

// readSubscribe is what the read and write rights may subscribe to:
// replies, records as they are published, the read models' changes (a
// wait for a projection wakes on them), and the stream's leader
// elections (a log's reads wait on them: natsio.Conn.WakeOnLeader).
var readSubscribe = []string{
	nats.InboxPrefix + ">",
	splog.SubjectPrefix + ".>",
	"$KV.>",
	"$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.>",
}

// readerPermissions is the read right on NATS.
func readerPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: readPublish},
		Subscribe: &server.SubjectPermission{Allow: readSubscribe},
	}
}

// writerPermissions is the write right on NATS: the read right, and the
// door's write subjects.
func writerPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append(slices.Clone(readPublish), splog.DoorSubject(splog.DoorWrite, ">"))},
		Subscribe: &server.SubjectPermission{Allow: readSubscribe},
	}
}

// tokenAuth authenticates NATS clients by token, with the right of the
// token they present.
type tokenAuth struct {
	admin, write, read string
	writer, reader     *server.Permissions
}

// Check implements server.Authentication. The users it registers have no
// name: a client with a user name that the server's options do not list
// is taken, at every reload of the options, for one whose user was
// removed, and disconnected (clientHasMovedToDifferentAccount in
// server/reload.go); each raise of the storage limit (storelimit.go)
// then cut every client off for the 2 s its library waits to reconnect.
func (a *tokenAuth) Check(c server.ClientAuthentication) bool {
	switch rightOf(c.GetOpts().Token, a.admin, a.write, a.read) {
	case rightAdmin:
		c.RegisterUser(&server.User{})
	case rightWrite:
		c.RegisterUser(&server.User{Permissions: a.writer})
	case rightRead:
		c.RegisterUser(&server.User{Permissions: a.reader})
	default:
		return false
	}
	return true
}

// natsRights puts the three rights on a listener whose credential is a
// token (Config.Token, or the data directory's): it creates the admin
// token beside the others and gives it to the server's own connection.
// secret returns a secret of the data directory, creating it.
func (s *Server) natsRights(secret func(string) (string, error)) error {
	if s.cfg.Token == "" || s.nopts.Authorization != s.cfg.Token {
		return nil // users, nkeys or a configuration file: their permissions
	}
	admin, err := secret(AdminTokenFile)
	if err != nil {
		return err
	}
	if admin == s.cfg.Token || admin == s.cfg.HTTPReadToken {
		return fmt.Errorf("credentials: %s must differ from the other tokens", filepath.Join(s.cfg.Dir, AdminTokenFile))
	}
	s.adminToken = admin
	s.nopts.Authorization = ""
	s.nopts.CustomClientAuthentication = &tokenAuth{
		admin:  admin,
		write:  s.cfg.Token,
		read:   s.cfg.HTTPReadToken,
		writer: writerPermissions(),
		reader: readerPermissions(),
	}
	s.own = append(s.own[:len(s.own):len(s.own)], nats.Token(admin)) // the last Token option wins
	return nil
}

// asAdmin marks ctx as a request of the admin right for the service
// layer, which writes actor key bindings for it alone.
func asAdmin(ctx context.Context, have right) context.Context {
	if have == rightAdmin {
		return sdk.AsAdmin(ctx)
	}
	return ctx
}

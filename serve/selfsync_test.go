package serve

import "testing"

// TestSelfSync: one node whose store spl lays out fsyncs through its own
// writer (the server without SyncAlways); a cluster, or a server the
// user configures with a NATS config file, fsyncs each message itself.
func TestSelfSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"one node", Config{Dir: t.TempDir()}, true},
		{"a cluster", Config{Dir: t.TempDir(), ClusterName: "c", ClusterListen: "127.0.0.1:0", ServerName: "n1", RouteSecret: "0123456789abcdef0123456789abcdef"}, false},
		{"a NATS config file", Config{Dir: t.TempDir(), NATSConfigFile: "nats.conf"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.selfSync(); got != tc.want {
				t.Errorf("selfSync = %v, want %v", got, tc.want)
			}
			if tc.cfg.NATSConfigFile != "" {
				return // natsOptions would read the file
			}
			o, _, err := tc.cfg.natsOptions()
			if err != nil {
				t.Fatal(err)
			}
			if o.SyncAlways == tc.want {
				t.Errorf("SyncAlways = %v with selfSync %v: exactly one of the two must fsync", o.SyncAlways, tc.want)
			}
		})
	}
	// A server started on one node answers appends durably by its
	// writer: the log opened with the store's directory.
	s := start(t, Config{})
	if s.nopts.SyncAlways {
		t.Fatal("a one-node server runs with SyncAlways")
	}
	if !s.c.Load().SelfSync() {
		t.Fatal("the server's own client does not fsync what it writes")
	}
}

package env

import (
	"path/filepath"
	"testing"
)

func TestHome(t *testing.T) {
	t.Setenv(HomeVar, "/data/spl")
	if got, err := Home(); err != nil || got != "/data/spl" {
		t.Fatalf("Home()=%q, %v, want /data/spl", got, err)
	}
	t.Setenv(HomeVar, "")
	t.Setenv("HOME", "/home/agent")
	if got, want := mustHome(t), filepath.Join("/home/agent", ".spl"); got != want {
		t.Fatalf("Home()=%q, want %q", got, want)
	}
}

func mustHome(t *testing.T) string {
	t.Helper()
	d, err := Home()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func() string
	}{
		{ActorVar, Actor}, {ServerVar, Server}, {CredsVar, Creds},
		{ServeTokenVar, ServeToken}, {ServePasswordVar, ServePassword},
		{EncryptionKeyFileVar, EncryptionKeyFile},
	} {
		t.Setenv(tc.name, "v-"+tc.name)
		if got, want := tc.read(), "v-"+tc.name; got != want {
			t.Errorf("%s: got %q, want %q", tc.name, got, want)
		}
	}
}

package log

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamChanges names each change that loses records or lets unchecked
// ones in, and none of the settings the owner brings up to date itself.
func TestStreamChanges(t *testing.T) {
	want := StreamConfig(DefaultStream, 1)
	for _, tc := range []struct {
		name   string
		change func(*jetstream.StreamConfig)
		says   string // "" for no change reported
	}{
		{"as provisioned", func(*jetstream.StreamConfig) {}, ""},
		{"unlimited as the server writes it", func(c *jetstream.StreamConfig) { c.MaxMsgs, c.MaxBytes, c.MaxMsgsPerSubject = -1, -1, -1 }, ""},
		{"an older de-duplication window", func(c *jetstream.StreamConfig) { c.Duplicates = 2 * time.Minute }, ""},
		{"a smaller record limit", func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1024 }, ""},
		{"compressed", func(c *jetstream.StreamConfig) { c.Compression = jetstream.S2Compression }, ""},
		{"max_msgs", func(c *jetstream.StreamConfig) { c.MaxMsgs = 1 }, "max_msgs 1"},
		{"max_bytes", func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 20 }, "max_bytes 1048576"},
		{"max_msgs_per_subject", func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 5 }, "max_msgs_per_subject 5"},
		{"max_age", func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "max_age 1h0m0s"},
		{"subjects", func(c *jetstream.StreamConfig) { c.Subjects = []string{"spl.rec.>", "evil.>"} }, "subjects"},
		{"a source", func(c *jetstream.StreamConfig) { c.Sources = []*jetstream.StreamSource{{Name: "EVIL"}} }, "a source EVIL"},
		{"a mirror", func(c *jetstream.StreamConfig) { c.Mirror = &jetstream.StreamSource{Name: "EVIL"} }, "a mirror of EVIL"},
		{"a transform", func(c *jetstream.StreamConfig) {
			c.SubjectTransform = &jetstream.SubjectTransformConfig{Source: ">", Destination: "spl.rec.x.>"}
		}, "a subject transform"},
		{"republish", func(c *jetstream.StreamConfig) { c.RePublish = &jetstream.RePublish{Source: ">", Destination: "out.>"} }, "republishing"},
		{"rollups", func(c *jetstream.StreamConfig) { c.AllowRollup = true }, "rollup"},
		{"ttls", func(c *jetstream.StreamConfig) { c.AllowMsgTTL = true }, "TTL"},
		{"sealed", func(c *jetstream.StreamConfig) { c.Sealed = true }, "sealed"},
		{"retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy }, "retention"},
		{"memory", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }, "storage"},
	} {
		have := want
		tc.change(&have)
		got := StreamChanges(have, want)
		switch {
		case tc.says == "" && len(got) > 0:
			t.Errorf("%s: reported %q, want nothing", tc.name, got)
		case tc.says != "" && (len(got) != 1 || !strings.Contains(got[0], tc.says)):
			t.Errorf("%s: reported %q, want one change naming %q", tc.name, got, tc.says)
		}
	}
}

package wire

// The JSON forms of erasure, pins, retention policies and the latest
// checkpoints across threads: what the CLI's --json prints and the HTTP
// API answers (erase, pin, retention, session list without --thread).

// Erase says what an erasure did: the ids it erased, those erased
// before, and the core.erasure records appended.
type Erase struct {
	Thread   string    `json:"thread"`
	Erased   []string  `json:"erased"`
	Already  []string  `json:"already"`
	Erasures []Receipt `json:"erasures"`
	// ErasedClocks and AlreadyClocks are the clocks of messages that are
	// no records (spl erase --clock), when any.
	ErasedClocks  []uint64 `json:"erased_clocks,omitempty"`
	AlreadyClocks []uint64 `json:"already_clocks,omitempty"`
}

// Pin is the answer of a pin: the core.pin record (the earlier one when
// Already), the thread it is on, and the checkpoint pinned.
type Pin struct {
	Receipt
	Thread  string `json:"thread"`
	Target  string `json:"target"`
	Already bool   `json:"already"`
}

// RetentionPolicy is a retention policy, and where it is stored when it
// is.
type RetentionPolicy struct {
	Scope    string `json:"scope"`  // "all" or "thread"
	Thread   string `json:"thread"` // "" for scope all
	KeepLast int    `json:"keep_last"`
	MaxAgeMS int64  `json:"max_age_ms"` // 0: no age limit
	ID       string `json:"id,omitempty"`
	Clock    uint64 `json:"clock,omitempty"`
	Actor    string `json:"actor,omitempty"`
	Time     string `json:"time,omitempty"`
}

// LatestCheckpoint is the latest checkpoint of a thread, as the
// checkpoint index holds it: an element of "session list --json" without
// --thread and of GET /v1/checkpoints/latest.
type LatestCheckpoint struct {
	Thread    string `json:"thread"`
	ID        string `json:"id"`
	Clock     uint64 `json:"clock"`
	Time      string `json:"time"` // TimeLayout, UTC
	TS        int64  `json:"ts"`   // Unix milliseconds
	Actor     string `json:"actor"`
	Name      string `json:"name"`
	SessionID string `json:"session_id"`
	Summary   string `json:"summary"`
}

package natsio

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
)

// The answers of plain publishes are read without encoding/json; wherever
// that path answers, it agrees with encoding/json, and everything else
// (errors, batches, other layouts, bad numbers) goes to encoding/json.
func TestParseAck(t *testing.T) {
	plain := []string{
		`{"stream":"SPL","seq":1}`,
		`{"stream":"KV_SPL_idx_threads","seq":9876543210}`,
		fmt.Sprintf(`{"stream":"SPL","seq":%d}`, uint64(math.MaxInt64)),
	}
	other := []string{
		`{"stream":"SPL","domain":"hub","seq":7}`,
		`{"stream":"SPL","seq":7,"duplicate": true}`,
		`{"stream":"SPL","seq":7,"batch":"b1","count":3}`,
		`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"SPL","seq":0}`,
		`{"stream":"SPL","seq":0}`,
		`{"stream":"SPL","seq":007}`,
		`{"stream":"SPL","seq":18446744073709551616}`,
		`{"stream":"SPL","seq":1e3}`,
		`{"stream":"S\"PL","seq":7}`,
		`{"stream":"SPL","seq":7} `,
		`{"stream":"SPL","seq":}`,
		`{"stream":"SPL"`,
		``,
		`not json`,
	}
	for _, in := range plain {
		got, ok := parsePlainAck([]byte(in))
		if !ok {
			t.Fatalf("%s: not read as a plain answer", in)
		}
		var want pubAck
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: encoding/json: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, encoding/json %+v", in, got, want)
		}
		if ack, err := parseAck([]byte(in)); err != nil || ack.Seq != want.Seq {
			t.Fatalf("%s: parseAck %+v, %v", in, ack, err)
		}
	}
	for _, in := range other {
		if ack, ok := parsePlainAck([]byte(in)); ok {
			t.Fatalf("%s: read as a plain answer %+v; encoding/json's to read", in, ack)
		}
	}
	if _, err := parseAck([]byte(other[3])); !errors.Is(err, ErrExpectation) {
		t.Fatalf("wrong last sequence: %v, want ErrExpectation", err)
	}
	if ack, err := parseAck([]byte(other[2])); err != nil || ack.Seq != 7 || ack.Batch != "b1" || ack.Count != 3 {
		t.Fatalf("batch answer: %+v, %v", ack, err)
	}
	for _, in := range []string{`{"stream":"SPL","seq":0}`, `not json`, ``} {
		if _, err := parseAck([]byte(in)); err == nil {
			t.Fatalf("%q: no error", in)
		}
	}
}

// Command sdkhttp measures spl serve's HTTP API from Go, the baseline the
// TypeScript and Python SDKs are compared with (bench/sdks.sh): one
// writer's durable emit p50, 64 concurrent emitters' records/s, and the
// latest checkpoint's p50, read with ?envelope=true and verified (id and
// body digest) as the other SDKs verify it. It prints one JSON object.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spl-dev/spl/bench/internal/stat"
	"github.com/spl-dev/spl/records"
)

func main() {
	url := flag.String("url", os.Getenv("SPL_URL"), "spl serve")
	token := flag.String("token", os.Getenv("SPL_TOKEN"), "bearer token of spl serve (write)")
	n := flag.Int("n", 300, "single-writer emits and latest reads")
	total := flag.Int("total", 3000, "records of the concurrent run")
	workers := flag.Int("c", 64, "concurrent emitters")
	flag.Parse()
	client := &http.Client{Transport: &bearer{token: *token, next: &http.Transport{MaxIdleConnsPerHost: 256}}}
	run := fmt.Sprintf("go_%d", time.Now().UnixNano())
	emit := func(thread string, body string, kind, act string) {
		req := fmt.Sprintf(`{"thread":%q,"act":%q,"kind":%q,"actor":"did:sync:agent:bench","body":%s}`, thread, act, kind, body)
		resp, err := client.Post(*url+"/v1/records", "application/json", bytes.NewBufferString(req))
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			panic(resp.Status)
		}
	}
	var lat []float64
	for i := range *n {
		t := time.Now()
		emit(run+"_one", fmt.Sprintf(`{"step":%d}`, i), "agent.step", "DO")
		lat = append(lat, stat.MS(time.Since(t)))
	}
	emitP50 := stat.P50(lat)
	var wg sync.WaitGroup
	next := make(chan int, *total)
	for i := range *total {
		next <- i
	}
	close(next)
	start := time.Now()
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				emit(fmt.Sprintf("%s_c%d", run, w), fmt.Sprintf(`{"step":%d}`, i), "agent.step", "DO")
			}
		}()
	}
	wg.Wait()
	rps := float64(*total) / time.Since(start).Seconds()
	cpThread := run + "_cp"
	emit(cpThread, `{"summary":"Completed auth refactor","learnings":["mutex pattern worked"],"next_steps":"Write migration tests"}`, records.KindCheckpoint, "LEARN")
	lat = lat[:0]
	for range *n {
		t := time.Now()
		resp, err := client.Get(*url + "/v1/threads/" + cpThread + "/checkpoint?envelope=true")
		if err != nil {
			panic(err)
		}
		var j struct {
			ID       string `json:"id"`
			Envelope []byte `json:"envelope"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
			panic(err)
		}
		resp.Body.Close()
		rec, err := records.Unmarshal(j.Envelope)
		if err != nil {
			panic(err)
		}
		id, err := records.ParseID(j.ID)
		if err != nil {
			panic(err)
		}
		if err := rec.Verify(id); err != nil {
			panic(err)
		}
		lat = append(lat, stat.MS(time.Since(t)))
	}
	json.NewEncoder(os.Stdout).Encode(map[string]float64{"emit_p50_ms": emitP50, "concurrent_rps": rps, "latest_p50_ms": stat.P50(lat)})
}

// bearer sends the token of spl serve with every request, as the SDKs do.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// Command ssestall measures what slow SSE readers cost spl serve: it
// starts the given spl binary's serve on a fresh data directory, opens N
// tails of one thread that read 4 KiB a second (under every write
// deadline, so only falling behind can cut them off), appends 200 records
// of 512 KiB for at most 40 s, and prints the server's peak RSS over its
// start, and the tails still open.
//
//	go run ./bench/ssestall BINARY N
//
// Run it with N = 0 for the cost of the appends alone, and with two
// binaries in the same run to compare them.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func rss(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			n, _ := strconv.Atoi(f[1])
			return n / 1024
		}
	}
	return 0
}

func main() {
	bin := os.Args[1]
	readers, _ := strconv.Atoi(os.Args[2])
	home, _ := os.MkdirTemp("", "ssemem")
	defer os.RemoveAll(home)
	addr := filepath.Join(home, "addr")
	cmd := exec.Command(bin, "serve", "--home", filepath.Join(home, "h"), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-addr-file", addr, "--log-level", "error")
	cmd.Start()
	defer cmd.Process.Kill()
	var a []byte
	for i := 0; i < 200 && len(a) == 0; i++ {
		time.Sleep(50 * time.Millisecond)
		a, _ = os.ReadFile(addr)
	}
	tok, _ := os.ReadFile(filepath.Join(home, "h", "token"))
	token := strings.TrimSpace(string(tok))
	base := "http://" + strings.TrimSpace(string(a))
	time.Sleep(time.Second)
	start := rss(cmd.Process.Pid)
	for i := 0; i < readers; i++ {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			panic(err)
		}
		c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(c, "GET /v1/threads/th/events?from=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token)
		go func() { // a trickle: 4 KiB a second, under every write deadline
			b := make([]byte, 4096)
			for {
				if _, err := c.Read(b); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
		}()
	}
	pad := strings.Repeat("x", 512<<10)
	peak := start
	deadline := time.Now().Add(40 * time.Second)
	n := 0
	for n < 200 && time.Now().Before(deadline) {
		body := fmt.Sprintf(`{"thread":"th","act":"DO","kind":"agent.step","actor":"did:sync:agent:m","body":{"n":%d,"pad":"%s"}}`, n, pad)
		req, _ := http.NewRequest("POST", base+"/v1/records", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 201 {
				n++
			}
		}
		if r := rss(cmd.Process.Pid); r > peak {
			peak = r
		}
	}
	for i := 0; i < 20; i++ {
		time.Sleep(250 * time.Millisecond)
		if r := rss(cmd.Process.Pid); r > peak {
			peak = r
		}
	}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "tail") && !strings.HasPrefix(sc.Text(), "#") {
				fmt.Println(sc.Text())
			}
		}
		resp.Body.Close()
	}
	fmt.Printf("%s: %d stalled readers, %d records of 512 KiB appended: RSS %d MiB at start, peak %d MiB (+%d)\n", filepath.Base(bin), readers, n, start, peak, peak-start)
}

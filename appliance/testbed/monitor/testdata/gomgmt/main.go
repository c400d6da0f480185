// Command gomgmt drives ovfwd's management interface with Debian's
// golang-github-apparentlymart-go-openvpn-mgmt (built in GOPATH mode
// against /usr/share/gocode; see the monitor suite). The library's client
// has no status or kill method, so those go through its exported
// demultiplexer on a second connection.
//
// Usage: gomgmt SOCKET CLIENTS KILL_CN
//
// It prints one result per line: "pid N", "state NAME DESC LOCAL",
// "bytecount CID IN OUT" (the first event of each of CLIENTS clients),
// "client CN CID RX TX" (status 3), "kill REPLY" (client-kill of KILL_CN's
// id) and "signal ERR".
package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/apparentlymart/go-openvpn-mgmt/demux"
	"github.com/apparentlymart/go-openvpn-mgmt/openvpn"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gomgmt SOCKET CLIENTS KILL_CN")
		os.Exit(2)
	}
	sock, killCN := os.Args[1], os.Args[3]
	want, _ := strconv.Atoi(os.Args[2])
	events := make(chan openvpn.Event, 256)
	c, err := openvpn.Dial(sock, events)
	check(err)
	pid, err := c.Pid()
	check(err)
	fmt.Println("pid", pid)
	st, err := c.LatestState()
	check(err)
	fmt.Println("state", st.NewState(), st.Description(), st.LocalTunnelAddr())
	check(c.SetByteCountEvents(time.Second))
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < want {
		select {
		case e, ok := <-events:
			if !ok {
				fail("events closed")
			}
			if bc, ok := e.(*openvpn.ByteCountEvent); ok && !seen[bc.ClientId()] {
				seen[bc.ClientId()] = true
				fmt.Println("bytecount", bc.ClientId(), bc.BytesIn(), bc.BytesOut())
			}
		case <-deadline:
			fail(fmt.Sprintf("bytecount events from %d clients in 10 s, want %d", len(seen), want))
		}
	}
	check(c.SetByteCountEvents(0))

	conn, err := net.Dial("unix", sock)
	check(err)
	replies, evs := make(chan []byte, 256), make(chan []byte, 256)
	go demux.Demultiplex(conn, replies, evs)
	go func() {
		for range evs {
		}
	}()
	_, err = conn.Write([]byte("status 3\n"))
	check(err)
	killID := ""
	for {
		l := <-replies
		if bytes.Equal(l, []byte("END")) {
			break
		}
		f := bytes.Split(l, []byte("\t"))
		if string(f[0]) == "CLIENT_LIST" && len(f) >= 13 {
			// Common Name, Client ID, Bytes Received, Bytes Sent
			fmt.Println("client", string(f[1]), string(f[10]), string(f[5]), string(f[6]))
			if string(f[1]) == killCN {
				killID = string(f[10])
			}
		}
	}
	if killID == "" {
		fail("no client " + killCN + " in status 3")
	}
	_, err = conn.Write([]byte("client-kill " + killID + "\n"))
	check(err)
	fmt.Println("kill", string(<-replies))
	fmt.Println("signal", c.SendSignal("SIGHUP"))
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "gomgmt:", msg)
	os.Exit(1)
}

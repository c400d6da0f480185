package vpne2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// Client is a stock openvpn client running in one client namespace.
type Client struct {
	Index   int
	NS      *netns.NS
	Profile string // the .ovpn it runs
	Log     string // appended across restarts
	V4, V6  netip.Addr
	p       *proc
	lab     *Lab
	upsSeen int // "Initialization Sequence Completed" lines before this start
}

// initDone is what openvpn logs once the tunnel is up.
const initDone = "Initialization Sequence Completed"

// NewProfile writes client i's profile (name "client<i>" unless p.Name is
// set) with `ovfwd pki client`'s code, remote the server's IPv4 address
// unless p.Remotes is set, and verb 4
// (the lowest level that logs each data-key installation).
func (l *Lab) NewProfile(i int, p pki.Profile) (string, error) {
	if p.Name == "" {
		p.Name = fmt.Sprintf("client%d", i)
	}
	if len(p.Remotes) == 0 {
		p.Remotes = []string{netip.AddrPortFrom(ServerAddr, VPNPort).String()}
	}
	p.Extra = append([]string{"verb 4"}, p.Extra...)
	return pki.ClientProfile(l.PKI, p)
}

// StartClient starts openvpn with profile in client namespace i.
func (l *Lab) StartClient(i int, profile string) (*Client, error) {
	c := &Client{Index: i, NS: l.Clients[i], Profile: profile, Log: filepath.Join(l.Dir, fmt.Sprintf("client%d.log", i)), lab: l}
	return c, c.Start()
}

// Start (re)starts the client process.
func (c *Client) Start() error {
	b, _ := os.ReadFile(c.Log)
	c.upsSeen = strings.Count(string(b), initDone)
	c.V4, c.V6 = netip.Addr{}, netip.Addr{}
	var err error
	if c.p, err = start(c.NS, c.Log, "openvpn", "--config", c.Profile, "--log-append", c.Log); err != nil {
		return err
	}
	c.lab.procs = append(c.lab.procs, c.p)
	return nil
}

// Kill ends the client abruptly (SIGKILL: no exit notification reaches
// the server, as when a laptop drops off the network).
func (c *Client) Kill() { c.p.stop(syscall.SIGKILL, 2*time.Second) }

// Exited reports whether the client process has ended by itself.
func (c *Client) Exited() bool { return c.p.Exited() }

// Stop ends the client politely (SIGTERM).
func (c *Client) Stop() { c.p.stop(syscall.SIGTERM, 3*time.Second) }

// WaitUp waits until this start of the client has completed its
// initialization and tun0 carries a global IPv4 and IPv6 address, and
// records them in V4 and V6.
func (c *Client) WaitUp(d time.Duration) error {
	deadline := time.Now().Add(d)
	for i := 0; i < 10000 && time.Now().Before(deadline); i++ {
		b, _ := os.ReadFile(c.Log)
		if strings.Count(string(b), initDone) > c.upsSeen {
			break
		}
		if c.p.Exited() {
			return fmt.Errorf("vpne2e: client %d exited (%v):\n%s", c.Index, c.p.err, logTail(c.Log, 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; i < 100 && time.Now().Before(deadline); i++ {
		v4, v6, err := c.NS.GlobalAddrs("tun0")
		if err == nil && v4.IsValid() && v6.IsValid() {
			c.V4, c.V6 = v4, v6
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("vpne2e: client %d not up with both addresses in %v:\n%s", c.Index, d, logTail(c.Log, 4000))
}

var dataCipher = regexp.MustCompile(`Data Channel: cipher '([A-Z0-9-]+)'`)

// Cipher is the data-channel cipher of the client's latest connection.
func (c *Client) Cipher() string {
	b, _ := os.ReadFile(c.Log)
	m := dataCipher.FindAllStringSubmatch(string(b), -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

// LogText is the client's whole log.
func (c *Client) LogText() string {
	b, _ := os.ReadFile(c.Log)
	return string(b)
}

// KeyInstalls counts the data keys the client installed (the first key
// and one per renegotiation), from its verb-4 log.
func (c *Client) KeyInstalls() int {
	return strings.Count(c.LogText(), "Incoming Data Channel: Cipher")
}

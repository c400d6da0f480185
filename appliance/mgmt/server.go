package mgmt

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// Backend is what the management interface reads and acts on: the
// daemon's status snapshot and its kill and signal paths, the same the
// status socket uses.
type Backend interface {
	// Snapshot is the status socket's snapshot.
	Snapshot() status.Snapshot
	// Kill disconnects the clients with this common name or real address
	// (the status socket's kill), telling them to RESTART.
	Kill(target string) (int, error)
	// KillClient disconnects the client with management client id cid,
	// sending msg (RESTART, HALT, …) as openvpn's client-kill does.
	KillClient(cid uint64, msg string) bool
	// Signal acts on SIGHUP (reload) or SIGTERM (stop).
	Signal(name string) error
}

// Options configure a Server.
type Options struct {
	Socket       string         // unix socket path ("" none)
	Listen       netip.AddrPort // loopback TCP ("" none); needs Password
	Password     string         // TCP clients' password
	MaxClients   int            // connections at once (0: 16)
	StatusFormat int            // "status" without a version (openvpn: status-version; 0: 1)
	Version      string         // ovfwd's version, for the title
	History      *History       // log and state history (nil: an empty one)
	// Authorized reports whether a unix-socket peer may run write commands
	// (kill, client-kill, signal): status.Authorized, the status socket's
	// rule.
	Authorized func(net.Conn) error
	// Log hears of refused connections, failed logins, refused commands
	// and clients that lost notifications (nil: nobody).
	Log *slog.Logger
}

// Stats are the server's counters.
type Stats struct {
	Connections uint64 // accepted
	Refused     uint64 // over MaxClients
	Dropped     uint64 // notifications dropped for clients that did not read
	Denied      uint64 // write commands refused to read-only peers
	BadPassword uint64
}

// Server is a running management interface.
type Server struct {
	opt  Options
	be   Backend
	hist *History
	lns  []net.Listener
	path string // unix socket to remove on Close

	active                                   atomic.Int32
	connections, refused, denied, badPasswrd atomic.Uint64
	dropped                                  atomic.Uint64

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// Listen starts the management interface on the unix socket and/or TCP
// address of o.
func Listen(o Options, be Backend) (*Server, error) {
	if o.MaxClients <= 0 {
		o.MaxClients = 16
	}
	if o.StatusFormat == 0 {
		o.StatusFormat = 1
	}
	s := &Server{opt: o, be: be, hist: o.History, conns: map[net.Conn]bool{}}
	if s.hist == nil {
		s.hist = NewHistory()
	}
	if s.opt.Log == nil {
		s.opt.Log = slog.New(slog.DiscardHandler)
	}
	if o.Socket != "" {
		if err := os.MkdirAll(filepath.Dir(o.Socket), 0o750); err != nil {
			return nil, fmt.Errorf("management: %w", err)
		}
		// The status socket's: bound with its mode, never over a live
		// socket or anything that is not a stale one.
		ln, err := status.ListenUnix(o.Socket, 0o660)
		if err != nil {
			return nil, fmt.Errorf("management: %w", err)
		}
		s.lns, s.path = append(s.lns, ln), o.Socket
	}
	if o.Listen.IsValid() {
		if o.Password == "" {
			s.closeListeners()
			return nil, errors.New("management: TCP needs a password")
		}
		ln, err := net.Listen("tcp", o.Listen.String())
		if err != nil {
			s.closeListeners()
			return nil, fmt.Errorf("management: %w", err)
		}
		s.lns = append(s.lns, ln)
	}
	for _, ln := range s.lns {
		s.wg.Add(1)
		go s.serve(ln)
	}
	return s, nil
}

// Addr is the TCP listener's address (nil without one).
func (s *Server) Addr() net.Addr {
	for _, ln := range s.lns {
		if ln.Addr().Network() == "tcp" {
			return ln.Addr()
		}
	}
	return nil
}

// History is the server's log and state history.
func (s *Server) History() *History { return s.hist }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{Connections: s.connections.Load(), Refused: s.refused.Load(), Dropped: s.dropped.Load(),
		Denied: s.denied.Load(), BadPassword: s.badPasswrd.Load()}
}

func (s *Server) closeListeners() {
	for _, ln := range s.lns {
		ln.Close()
	}
}

// Close stops listening and closes every connection.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.closeListeners()
	s.wg.Wait()
	if s.path != "" {
		_ = os.Remove(s.path)
	}
	return nil
}

func (s *Server) serve(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if int(s.active.Add(1)) > s.opt.MaxClients {
			s.active.Add(-1)
			s.refused.Add(1)
			s.opt.Log.Warn("management connection refused: too many", "max_clients", s.opt.MaxClients)
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, "ERROR: too many management connections\r\n")
			c.Close()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			s.active.Add(-1)
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		s.connections.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.active.Add(-1)
			s.handle(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// conn is one management client.
type conn struct {
	s     *Server
	c     net.Conn
	out   *outbox
	write bool // may run write commands

	stopBytecount chan struct{} // closes the running bytecount timer
}

const greeting = ">INFO:OpenVPN Management Interface Version 5 -- type 'help' for more info\r\n"

// passwordTries is openvpn's MANAGEMENT_N_PASSWORD_RETRIES.
const passwordTries = 3

func (s *Server) handle(nc net.Conn) {
	defer nc.Close()
	c := &conn{s: s, c: nc, out: newOutbox(nc, &s.dropped)}
	defer func() {
		s.hist.unsubscribeAll(c)
		c.setBytecount(0)
		if lost := c.out.close(); lost > 0 {
			s.opt.Log.Warn("management client fell behind; notifications dropped", "dropped", lost)
		}
	}()
	r := bufio.NewReaderSize(nc, maxLine)
	if _, tcp := nc.(*net.TCPConn); tcp {
		if !c.login(r) {
			s.opt.Log.Warn("management login failed", "remote", nc.RemoteAddr().String())
			return
		}
		c.write = true // the password is the credential, as openvpn's
	} else {
		c.write = s.opt.Authorized != nil && s.opt.Authorized(nc) == nil
	}
	c.out.reply([]byte(greeting))
	for c.out.replyRoom() {
		line, err := readLine(r)
		if errors.Is(err, errLineTooLong) {
			c.out.reply([]byte("ERROR: command line too long\r\n"))
			continue
		}
		if err != nil {
			return
		}
		if !c.command(line) {
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line, refusing (and skipping) one over maxLine.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if err != nil {
			return "", err
		}
		return "", errLineTooLong
	}
	if err != nil && len(line) == 0 {
		return "", err
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

// login asks for the password (man_check_password): up to three tries.
func (c *conn) login(r *bufio.Reader) bool {
	for try := 0; try < passwordTries; try++ {
		c.out.reply([]byte("ENTER PASSWORD:"))
		line, err := readLine(r)
		if err != nil && !errors.Is(err, errLineTooLong) {
			return false
		}
		if err == nil && subtle.ConstantTimeCompare([]byte(line), []byte(c.s.opt.Password)) == 1 {
			c.out.reply([]byte("SUCCESS: password is correct\r\n"))
			return true
		}
		c.s.badPasswrd.Add(1)
		c.out.reply([]byte("ERROR: bad password\r\n"))
	}
	return false
}

// setBytecount starts (n > 0) or stops the >BYTECOUNT_CLI timer.
func (c *conn) setBytecount(n int) {
	if c.stopBytecount != nil {
		close(c.stopBytecount)
		c.stopBytecount = nil
	}
	if n <= 0 {
		return
	}
	stop := make(chan struct{})
	c.stopBytecount = stop
	go func() {
		t := time.NewTicker(time.Duration(n) * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			snap := c.s.be.Snapshot()
			if snap.VPN == nil {
				continue
			}
			var b []byte
			for _, p := range snap.VPN.Peers {
				// multi.c/manage.c man_bytecount_output_server: the
				// client's link bytes in and out.
				b = fmt.Appendf(b[:0], ">BYTECOUNT_CLI:%d,%d,%d\r\n", p.ClientID, p.LinkRx, p.LinkTx)
				c.out.notify(b)
			}
		}
	}()
}

// command runs one line; false ends the connection (quit, exit).
func (c *conn) command(line string) bool {
	p, err := ParseLine(line)
	if err != nil {
		c.printf("ERROR: %v", err)
		return true
	}
	if len(p) == 0 {
		return true
	}
	if writeCommands[p[0]] && !c.write {
		c.s.denied.Add(1)
		c.s.opt.Log.Warn("management command refused to a read-only connection", "command", p[0])
		c.printf("ERROR: permission denied: '%s' needs the daemon's user or group (read-only connection)", p[0])
		return true
	}
	if need, ok := minParams[p[0]]; ok && len(p)-1 < need {
		atLeast := ""
		if p[0] == "log" || p[0] == "client-kill" {
			atLeast = "at least "
		}
		plural := ""
		if need > 1 {
			plural = "s"
		}
		c.printf("ERROR: the '%s' command requires %s%d parameter%s", p[0], atLeast, need, plural)
		return true
	}
	switch p[0] {
	case "exit", "quit":
		return false
	case "help":
		c.help()
	case "version":
		if len(p) == 1 {
			c.printf("OpenVPN Version: %s", status.Title(c.s.opt.Version))
			c.printf("Management Version: 5")
			c.printf("END")
		}
	case "pid":
		c.printf("SUCCESS: pid=%d", os.Getpid())
	case "nclients", "load-stats":
		c.loadStats(p[0] == "nclients")
	case "status":
		version := c.s.opt.StatusFormat
		if len(p) > 1 {
			version = atoi(p[1])
			if version == 0 {
				version = c.s.opt.StatusFormat
			}
		}
		snap := c.s.be.Snapshot()
		var b strings.Builder
		status.WriteOpenVPN(&b, &snap, version, time.Now(), "\r\n")
		c.out.reply([]byte(b.String()))
	case "kill":
		c.kill(p[1])
	case "client-kill":
		c.clientKill(p[1:])
	case "bytecount":
		c.setBytecount(atoi(p[1]))
		c.printf("SUCCESS: bytecount interval changed")
	case "state":
		if len(p) == 1 {
			p = append(p, "1")
		}
		for _, a := range p[1:min(len(p), 3)] {
			c.history(a, "state")
		}
	case "log":
		for _, a := range p[1:min(len(p), 3)] {
			c.history(a, "log")
		}
	case "signal":
		c.signal(p[1])
	case "client-auth", "client-auth-nt", "client-deny", "client-pending-auth", "echo", "hold", "verb", "mute",
		"auth-retry", "username", "password", "forget-passwords", "needok", "needstr", "cr-response", "net",
		"env-filter", "rsa-sig", "pk-sig", "certificate", "remote", "remote-entry-count", "remote-entry-get", "proxy", "test":
		c.printf("ERROR: The '%s' command is not supported by the current daemon mode", p[0])
	default:
		c.printf("ERROR: unknown command, enter 'help' for more options")
	}
	return true
}

// writeCommands change the daemon's state: the status socket's write
// operations' rule applies to them.
var writeCommands = map[string]bool{"kill": true, "client-kill": true, "signal": true}

// minParams are man_need's requirements.
var minParams = map[string]int{"kill": 1, "client-kill": 1, "bytecount": 1, "log": 1, "signal": 1}

func (c *conn) printf(format string, args ...any) {
	c.out.reply(fmt.Appendf(nil, format+"\r\n", args...))
}

// atoi is C's: the leading digits, 0 without any.
func atoi(s string) int {
	n := 0
	neg := false
	for i, ch := range s {
		if i == 0 && (ch == '-' || ch == '+') {
			neg = ch == '-'
			continue
		}
		if ch < '0' || ch > '9' || n > 1<<30 {
			break
		}
		n = n*10 + int(ch-'0')
	}
	if neg {
		return -n
	}
	return n
}

func (c *conn) loadStats(onlyClients bool) {
	snap := c.s.be.Snapshot()
	var n int
	var in, out uint64
	if snap.VPN != nil {
		n = len(snap.VPN.Peers)
		for _, p := range snap.VPN.Peers {
			in += p.LinkRx
			out += p.LinkTx
		}
	}
	if onlyClients {
		c.printf("SUCCESS: nclients=%d", n)
		return
	}
	c.printf("SUCCESS: nclients=%d,bytesin=%d,bytesout=%d", n, in, out)
}

// kill is man_kill: "IP:port" kills by real address, anything else by
// common name.
func (c *conn) kill(victim string) {
	host, port, isAddr := strings.Cut(victim, ":")
	if isAddr && host != "" && port != "" {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is4() {
			c.printf("ERROR: error parsing IP address: %s", host)
			return
		}
		pn := atoi(port)
		if pn <= 0 || pn >= 65536 {
			c.printf("ERROR: port number is out of range: %s", port)
			return
		}
		addr := netip.AddrPortFrom(ip, uint16(pn)).String()
		if n, err := c.s.be.Kill(addr); err == nil && n > 0 {
			c.printf("SUCCESS: %d client(s) at address %s killed", n, addr)
		} else {
			c.printf("ERROR: client at address %s not found", addr)
		}
		return
	}
	if host == "" {
		c.printf("ERROR: kill parse")
		return
	}
	if n, err := c.s.be.Kill(host); err == nil && n > 0 {
		c.printf("SUCCESS: common name '%s' found, %d client(s) killed", host, n)
	} else {
		c.printf("ERROR: common name '%s' not found", host)
	}
}

func (c *conn) clientKill(args []string) {
	cid, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		c.printf("ERROR: cannot parse CID")
		return
	}
	msg := "RESTART"
	if len(args) > 1 {
		msg = args[1]
	}
	if c.s.be.KillClient(cid, msg) {
		c.printf("SUCCESS: client-kill command succeeded")
	} else {
		c.printf("ERROR: client-kill command failed")
	}
}

// history is man_history for "log" and "state".
func (c *conn) history(parm, kind string) {
	isState := kind == "state"
	switch n := atoi(parm); {
	case parm == "on" || parm == "off":
		c.s.hist.subscribe(c, isState, parm == "on")
		c.printf("SUCCESS: real-time %s notification set to %s", kind, strings.ToUpper(parm))
	case parm == "all" || n > 0:
		var es []entry
		if isState {
			es = c.s.hist.lastState(n)
		} else {
			es = c.s.hist.lastLog(n)
		}
		var b []byte
		for _, e := range es {
			b = append(b, formatEntry(e)...)
			b = append(b, '\r', '\n')
		}
		c.out.reply(append(b, "END\r\n"...))
	default:
		c.printf("ERROR: %s parameter must be 'on' or 'off' or some number n or 'all'", kind)
	}
}

func (c *conn) signal(name string) {
	switch name {
	case "SIGHUP", "SIGTERM":
	case "SIGUSR1", "SIGUSR2":
		c.printf("ERROR: signal '%s' is currently ignored", name)
		return
	default:
		c.printf("ERROR: signal '%s' is not a known signal type", name)
		return
	}
	if err := c.s.be.Signal(name); err != nil {
		c.printf("ERROR: signal '%s': %v", name, err)
		return
	}
	c.printf("SUCCESS: signal %s thrown", name)
}

func (c *conn) help() {
	var b strings.Builder
	b.WriteString("Management Interface for " + status.Title(c.s.opt.Version) + "\r\nCommands:\r\n")
	for _, l := range helpLines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("END\r\n")
	c.out.reply([]byte(b.String()))
}

// helpLines are the commands ovfwd answers, in openvpn's words.
var helpLines = []string{
	"bytecount n            : Show bytes in/out, update every n secs (0=off).",
	"exit|quit              : Close management session.",
	"help                   : Print this message.",
	"kill cn                : Kill the client instance(s) having common name cn.",
	"kill IP:port           : Kill the client instance connecting from IP:port.",
	"load-stats             : Show global server load stats.",
	"log [on|off] [N|all]   : Turn on/off realtime log display",
	"                         + show last N lines or 'all' for entire history.",
	"nclients               : Show the number of connected clients.",
	"pid                    : Show process ID of the current OpenVPN process.",
	"client-kill CID [M]    : Kill client instance CID with message M (def=RESTART)",
	"signal s               : Send signal s to daemon,",
	"                         s = SIGHUP|SIGTERM.",
	"state [on|off] [N|all] : Like log, but show state history.",
	"status [n]             : Show current daemon status info using format #n.",
	"version                : Show current version of daemon.",
}

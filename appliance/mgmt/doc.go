// Package mgmt is OpenVPN's management interface, the subset monitoring
// and admin tools use (openvpn's doc/management-notes.txt, src/openvpn/
// manage.c): version, status 1-3, load-stats, nclients, kill, client-kill,
// bytecount (>BYTECOUNT_CLI), state, log, pid, help, signal, quit/exit, on
// a unix socket and optionally loopback TCP behind a password.
//
// It holds no state of its own about clients: every answer comes from the
// daemon's status snapshot and every action goes through the daemon's kill
// and signal paths (Backend), so `ovfwd status`, the metrics, the status
// file and this interface always agree.
//
// Write commands (kill, client-kill, signal) follow the status socket's
// rule (status.Authorized): on the unix socket only root, the daemon's
// user and members of its group run them; others connected through a
// loosened socket mode get the read-only commands. On TCP the password is
// the credential.
//
// Threading: each connection has a reader goroutine (its commands) and a
// writer goroutine (its outbox). Notifications (log and state lines,
// bytecounts) are queued without blocking whoever produced them; a client
// more than outboxLimit behind loses them (Stats.Dropped), and one whose
// socket accepts nothing for writeTimeout is disconnected.
package mgmt

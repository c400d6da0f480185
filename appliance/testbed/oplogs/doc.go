// Package oplogs is the suite of what an operator alerts on, against
// `ovfwd run` (as its unit runs it) with stock openvpn 2.6 clients in the
// vpne2e namespace lab: a client with a wrong password and a killed client
// leave event lines in the daemon's log; the shipped fail2ban filter, run
// by fail2ban-regex over that log, finds the refused client's address and
// nothing else; and the daemon's metrics count the refusal where the
// shipped alert rule and dashboard look for it.
//
// The package holds tests only.
package oplogs

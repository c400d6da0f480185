// Package hooks is the suite of client_connect, client_disconnect and
// learn_address against `ovfwd run` (as its unit runs it) with a stock
// openvpn 2.6 client, in the vpne2e namespace lab:
//
//   - the same script, dumping its environment and arguments, runs under
//     ovfwd and under a stock openvpn 2.6 server for the same client; the
//     variables both must agree on have the same values, those that differ
//     between any two runs (times, ports, pids, byte counts) are present in
//     both, and the rest of openvpn's are logged (docs/monitoring.md lists
//     them);
//   - a failing client-connect refuses the client with AUTH_FAILED;
//   - a deferred client-connect (2 in client_connect_deferred_file, the
//     answer from a background process) admits the client with the route
//     its configuration file pushed.
//
// The package holds tests only.
package hooks

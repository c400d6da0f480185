// Package acl is the namespace suite of [[acl]]: `ovfwd run` (as the unit
// runs it) with stock openvpn 2.6 clients in two groups and a routed host
// beside them, each reaching only what its list allows, the counters, a
// reload that moves a client between groups with its tunnel up, and a
// routed port's list with the XDP fast path forced on and off. The tests
// are in acl_netns_test.go; the lab is vpne2e's.
package acl

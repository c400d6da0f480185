// Package scaleout is the testbed for several ovfwd appliances behind a
// routing daemon (BIRD 2): two appliances, each with its own pool and a
// BIRD that announces what ovfwd exports, an upstream router running BIRD
// with ECMP, a LAN host behind it, and stock openvpn clients that list
// both appliances as remotes. Not part of the product.
package scaleout

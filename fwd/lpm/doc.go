// Package lpm is ovfwd's longest-prefix-match table for IPv4 and IPv6 routes.
//
// # Threading contract
//
// A published table (*V4, *V6) is immutable. Insert and Delete return a new
// table that shares every node they did not touch with the old one (path
// copying), so the control plane publishes the result through an atomic
// pointer and data-plane workers call Lookup on whatever table they loaded,
// without a lock and without allocating. A nil table is a valid empty table.
// Only one goroutine may update a given lineage of tables at a time (updates
// are not merged); readers are unlimited. A V4Builder/V6Builder is owned by
// one goroutine and mutates its nodes in place until Build hands them over.
//
// # Layout
//
// The trie has 8-bit strides: IPv4 uses at most 4 levels, IPv6 at most 16.
// The node at depth d holds the prefixes of length 8d+1 … 8d+8 (the root also
// holds /0) as a complete binary tree over its octet, numbered like ART
// (Hariguchi, "Allotment Routing Table"): index 1 is the node's own base, row
// L (indexes 2^L … 2^(L+1)-1) the prefixes L bits into the stride, so a /24
// lives at depth 2, index 256+octet2.
//
// Nodes are compressed with bitmaps, as in popcount tries (Poptrie, BART):
//
//   - prefixes: a 512-bit set of the occupied indexes plus a dense slice of
//     values in index order (the value of index i is at popcount of the set
//     below i);
//   - children: a 256-bit set of occupied octets plus a dense slice of child
//     pointers in octet order.
//
// A child slot whose subtree would hold a single prefix holds that prefix
// instead, as a leaf (path compression, like BART's fringes): a /128 host
// costs one leaf, not a chain of 15 nodes, and a lone /24 needs no depth-2
// node. Deletes collapse subtrees back into leaves, so the shape of a table
// depends only on its prefixes, not on its history.
//
// Lookup walks down at most 4 (16) nodes; in each it finds the longest
// prefix covering the octet with three bit tests and one masked word (the
// nine candidates are the octet's ancestors in the node's tree), reads that
// value at once (the load overlaps the descent), and stops at a missing
// child or a leaf. No prefix expansion is stored in the trie, so an update
// touches only the nodes on one root-to-leaf path: Insert and Delete copy
// at most 4 (16) node headers and their slices (a few KiB), whatever the
// length.
//
// An IPv4 table adds a direct-indexed first level (top.go): 65,536 entries,
// one per /16, each holding the longest prefix of length ≤ 16 that covers
// the /16 and the trie's child slot for it. A lookup starts there, at depth
// 2, which removes the root's and the depth-1 node's loads from the chain
// of dependent loads. The entries are derived from the trie and split into
// 256 chunks of 4 KiB behind a directory, so an update copies the
// directory (2 KiB) and re-derives one chunk (2^(8-len) chunks for the
// rare prefixes shorter than /8); chunks without routes share one empty
// chunk.
//
// # Memory
//
// An IPv4 table's first level costs 2 KiB plus 4 KiB per first octet
// with routes (1 MiB when all have some).
// A node costs 192 bytes plus 8 bytes per child and 4 bytes per prefix;
// a leaf is a node header with no slices. Build trims builder slack and
// path-copied slices are exact. BenchmarkBuildV4_1M (a million random IPv4
// routes of a BGP-like length mix) and BenchmarkBuildV6_100k report the
// bytes a table takes; docs/benchmarks.md keeps the figures. Values are
// plain uint32s (a next-hop index, say); the table does not interpret them.
//
// # Cost
//
// Lookup is bounded by memory latency, not instructions: cheap
// when the nodes it touches are in cache, plus a dependent cache miss per node
// header, child slice and value read when they are not. With a million
// routes and uniformly random destinations the working set exceeds the
// caches and a lookup costs two or three DRAM accesses in a row.
// LookupBatch, for a burst of packets, walks up to 64 lookups level by
// level and, at each level, loads every lane's node header, then every
// lane's value and child slot, before using any of them, so the misses of
// the whole burst overlap: same answers, several times the throughput on
// large tables. Figures: BenchmarkLookupV4_1M, BenchmarkLookupBatchV4_1M,
// and docs/benchmarks.md.
package lpm

// Command ifcgen derives the bit offset and width of every named field of a
// set of mlx5_ifc.h structures and prints them as the layout table that
// prm's layout test checks the Go constants against.
//
//	go run ./mlx5/prm/internal/ifcgen -src mlx5_ifc.h -origin "repo path@commit" > mlx5/prm/testdata/mlx5_ifc_layout.txt
//
// The committed table came from the header at the origin recorded in its
// first line.
//
// It understands the subset of C the header uses for *_bits structures:
// "u8 name[w];", "u8 name[n][w];", flexible arrays, nested and anonymous
// structs/unions and DECLARE_FLEX_ARRAY. Offsets follow MLX5_SET: bit 0 is
// the most significant bit of byte 0.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

type member struct {
	name  string
	width int    // bits per element for u8 fields
	count int    // array elements; 1 for scalars, 0 for flexible arrays
	ref   string // referenced struct/union name
	anon  *def   // anonymous struct/union
}

type def struct {
	union   bool
	members []member
}

var (
	defs   = map[string]*def{}
	reTop  = regexp.MustCompile(`^(struct|union) mlx5_ifc_(\w+?)(?:_bits)? \{`)
	reBits = regexp.MustCompile(`^u8\s+(\w+)((?:\[[^\]]*\])+);`)
	reRef  = regexp.MustCompile(`^(?:struct|union) mlx5_ifc_(\w+?)(?:_bits)?\s+(\w+)((?:\[[^\]]*\])*);`)
	reFlex = regexp.MustCompile(`^DECLARE_FLEX_ARRAY\((?:struct|union) mlx5_ifc_(\w+)_bits,\s*(\w+)\);`)
	reAnon = regexp.MustCompile(`^(struct|union)\s*\{`)
	reDims = regexp.MustCompile(`\[([^\]]*)\]`)
)

func num(s string) int {
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return -1 // a macro: the member is marked unparsed below
	}
	return int(v)
}

func parse(lines []string) {
	var stack []*def
	var names []string
	for _, raw := range lines {
		l := strings.TrimSpace(raw)
		if j := strings.Index(l, "/*"); j >= 0 && !strings.Contains(l[:j], ";") {
			l = strings.TrimSpace(l[:j])
		}
		if len(stack) == 0 {
			if m := reTop.FindStringSubmatch(l); m != nil {
				d := &def{union: m[1] == "union"}
				stack = []*def{d}
				names = []string{m[2]}
			}
			continue
		}
		cur := stack[len(stack)-1]
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "//") || strings.HasPrefix(l, "*") || strings.HasPrefix(l, "/*"):
		case strings.HasPrefix(l, "}"):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				defs[names[0]] = cur
			}
		case reAnon.MatchString(l):
			d := &def{union: strings.HasPrefix(l, "union")}
			cur.members = append(cur.members, member{anon: d, count: 1})
			stack = append(stack, d)
		case reBits.MatchString(l):
			m := reBits.FindStringSubmatch(l)
			dims := reDims.FindAllStringSubmatch(m[2], -1)
			mem := member{name: m[1], count: 1}
			mem.width = num(dims[len(dims)-1][1])
			if len(dims) == 2 {
				mem.count = num(dims[0][1])
			}
			if mem.width < 0 {
				mem.count = -1
			}
			cur.members = append(cur.members, mem)
		case reRef.MatchString(l):
			m := reRef.FindStringSubmatch(l)
			mem := member{name: m[2], ref: m[1], count: 1}
			if m[3] != "" {
				mem.count = num(reDims.FindStringSubmatch(m[3])[1])
			}
			cur.members = append(cur.members, mem)
		case reFlex.MatchString(l):
			m := reFlex.FindStringSubmatch(l)
			cur.members = append(cur.members, member{name: m[2], ref: m[1], count: 0})
		default:
			// Unknown syntax inside a structure: remember it so that a
			// layout depending on it fails instead of being silently wrong.
			cur.members = append(cur.members, member{name: "?unparsed: " + l, count: -1})
		}
	}
}

// size is the size in bits, or -1 when it depends on something the parser
// could not read (a macro dimension, a structure from another header).
func (d *def) size() int {
	total := 0
	for _, m := range d.members {
		s := m.size()
		switch {
		case d.union:
			total = max(total, s) // an unknown alternative does not move the others
		case s < 0:
			return -1
		default:
			total += s
		}
	}
	return total
}

func (m member) size() int {
	switch {
	case m.count < 0:
		return -1
	case m.anon != nil:
		return m.anon.size()
	case m.ref != "":
		d, ok := defs[m.ref]
		if !ok {
			return -1
		}
		if s := d.size(); s >= 0 {
			return s * m.count
		}
		return -1
	default:
		return m.width * m.count
	}
}

type row struct {
	path       string
	bit, width int
}

// flatten appends every named field of d at bit offset base. It returns
// false when it met a member of unknown size in a structure: offsets after
// it cannot be derived, so nothing more is emitted.
func flatten(d *def, prefix string, base int, out *[]row) bool {
	off := base
	for _, m := range d.members {
		switch {
		case m.anon != nil:
			if !flatten(m.anon, prefix, off, out) && !d.union {
				return false
			}
		case m.ref != "":
			if sub, ok := defs[m.ref]; ok {
				if !flatten(sub, prefix+m.name+".", off, out) && !d.union {
					return false
				}
			}
		case m.count >= 0 && !strings.HasPrefix(m.name, "reserved"):
			// An array of n u8 fields is one byte string of n × width bits; a
			// flexible array reports its element width.
			*out = append(*out, row{prefix + m.name, off, m.width * max(m.count, 1)})
		}
		if !d.union {
			s := m.size()
			if s < 0 {
				return false
			}
			off += s
		}
	}
	return true
}

// defaultRoots are the structures prm uses (testdata/mlx5_ifc_layout.txt).
var defaultRoots = strings.Join(strings.Fields(`
	cmd_hca_cap per_protocol_networking_offload_caps flow_table_nic_cap query_hca_cap_in enable_hca_in 
	disable_hca_in query_issi_out set_issi_in query_pages_in query_pages_out manage_pages_in 
	manage_pages_out access_register_in access_register_out init_hca_in teardown_hca_in 
	teardown_hca_out alloc_uar_out dealloc_uar_in alloc_pd_out dealloc_pd_in 
	alloc_transport_domain_out dealloc_transport_domain_in create_mkey_in create_mkey_out 
	destroy_mkey_in create_eq_in create_eq_out destroy_eq_in create_cq_in create_cq_out destroy_cq_in 
	create_rq_in create_rq_out modify_rq_in destroy_rq_in create_sq_in create_sq_out modify_sq_in 
	destroy_sq_in create_tis_in create_tis_out destroy_tis_in create_rqt_in create_rqt_out 
	destroy_rqt_in create_tir_in create_tir_out destroy_tir_in create_flow_table_in 
	create_flow_table_out destroy_flow_table_in create_flow_group_in create_flow_group_out 
	destroy_flow_group_in set_fte_in delete_fte_in set_flow_table_root_in query_nic_vport_context_in 
	query_nic_vport_context_out modify_nic_vport_context_in query_vport_state_in query_vport_state_out 
	paos_reg pmtu_reg health_buffer
`), ",")

func main() {
	src := flag.String("src", "mlx5_ifc.h", "path of mlx5_ifc.h")
	origin := flag.String("origin", "", "where the header came from (recorded in the output)")
	roots := flag.String("roots", defaultRoots, "comma-separated structure names (without mlx5_ifc_ and _bits)")
	flag.Parse()
	f, err := os.Open(*src)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	parse(lines)
	names := strings.Split(*roots, ",")
	sort.Strings(names)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "# Derived by mlx5/prm/internal/ifcgen from %s\n", *origin)
	fmt.Fprintf(w, "# Columns: struct.field.path bit_offset bit_width (MLX5_SET numbering: bit 0 = MSB of byte 0)\n")
	for _, n := range names {
		d, ok := defs[n]
		if !ok {
			fmt.Fprintln(os.Stderr, "no structure", n)
			os.Exit(1)
		}
		var out []row
		flatten(d, n+".", 0, &out)
		fmt.Fprintf(w, "%s.$size %d 0\n", n, d.size())
		for _, r := range out {
			fmt.Fprintf(w, "%s %d %d\n", r.path, r.bit, r.width)
		}
	}
}

package prm

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ifcTable reads testdata/mlx5_ifc_layout.txt: "path bit width" per line,
// derived from mlx5_ifc.h by internal/ifcgen.
func ifcTable(t *testing.T) map[string][2]uint32 {
	t.Helper()
	f, err := os.Open("testdata/mlx5_ifc_layout.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table := map[string][2]uint32{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		parts := strings.Fields(line)
		if len(parts) != 3 {
			t.Fatalf("bad table line %q", line)
		}
		bit, err1 := strconv.Atoi(parts[1])
		width, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("bad table line %q", line)
		}
		table[parts[0]] = [2]uint32{uint32(bit), uint32(width)}
	}
	if len(table) < 1000 {
		t.Fatalf("table has only %d fields", len(table))
	}
	return table
}

func TestLayoutMatchesMlx5Ifc(t *testing.T) {
	table := ifcTable(t)
	for _, e := range Layout() {
		want, ok := table[e.Path]
		if !ok {
			t.Errorf("%s: not in the mlx5_ifc.h table", e.Path)
			continue
		}
		got := [2]uint32{e.Field.Bit, e.Field.Width}
		// A pas entry is one be64 in the driver; the header splits cmd_pas
		// into pa_h (32 bits) and pa_l. The start is what matters.
		if strings.HasSuffix(e.Path, ".pas.pa_h") && got[1] == 64 {
			got[1] = 32
		}
		if got != want {
			t.Errorf("%s: Go bit %d width %d (byte 0x%x), mlx5_ifc.h bit %d width %d (byte 0x%x)",
				e.Path, got[0], got[1], got[0]/8, want[0], want[1], want[0]/8)
		}
	}
}

// Command lengths the driver sends must be the header's structure sizes.
func TestCommandSizesMatchMlx5Ifc(t *testing.T) {
	table := ifcTable(t)
	sizes := map[string]int{
		"init_hca_in":                 InitHCAInLen,
		"query_issi_out":              QueryISSIOutLen,
		"create_tis_in":               CreateTISInLen,
		"create_flow_table_in":        CreateFlowTableLen,
		"create_flow_group_in":        CreateFlowGroupLen,
		"set_fte_in":                  SetFTEInBaseLen,
		"destroy_flow_table_in":       FlowCmdInLen,
		"set_flow_table_root_in":      FlowCmdInLen,
		"query_nic_vport_context_out": QueryNICVportOutLen,
		"modify_nic_vport_context_in": ModifyNICVportInLen,
		"create_rqt_in":               CreateRQTInBaseLen,
		"create_cq_in":                PASOffset,
		"create_eq_in":                PASOffset,
		"create_rq_in":                PASOffset,
		"create_sq_in":                PASOffset,
		"cmd_hca_cap":                 256, // the general caps proper; the capability area is 4096
		"health_buffer":               0x40,
	}
	for name, want := range sizes {
		got, ok := table[name+".$size"]
		if !ok {
			t.Errorf("%s: no size in table", name)
			continue
		}
		if int(got[0]/8) != want {
			t.Errorf("%s: Go length %d, mlx5_ifc.h size %d", name, want, got[0]/8)
		}
	}
}

func TestFieldSetGet(t *testing.T) {
	b := make([]byte, 16)
	f := F(0x04, 23, 16)
	f.Set(b, 0x1AB) // wider than 8 bits: truncated like MLX5_SET
	if b[5] != 0xAB || b[4] != 0 || b[6] != 0 {
		t.Fatalf("Set wrote % x", b)
	}
	if got := f.Get(b); got != 0xAB {
		t.Fatalf("Get = %#x", got)
	}
	g := F(0x04, 31, 28)
	g.Set(b, 0xF)
	if f.Get(b) != 0xAB || b[4] != 0xF0 {
		t.Fatalf("neighbour field disturbed: % x", b)
	}
	q := D64(0x08)
	q.Set(b, 0x0102030405060708)
	if b[8] != 1 || b[15] != 8 || q.Get(b) != 0x0102030405060708 {
		t.Fatalf("D64: % x", b)
	}
}

package dp

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLayoutMatchesUpstream checks every data-path offset and constant in
// prm.go against testdata/upstream_layout.txt, derived from the public kernel
// headers. Each table row must map to a constant here and every mapping must
// have a row, so neither side can drift silently.
func TestLayoutMatchesUpstream(t *testing.T) {
	ours := map[string]int{
		"mlx5_cqe64 outer_l3_tunneled":           CQEOffTunneled,
		"mlx5_cqe64 wqe_id":                      CQEOffWQEID,
		"mlx5_cqe64 rss_hash_result":             CQEOffRSSHashResult,
		"mlx5_cqe64 rss_hash_type":               CQEOffRSSHashType,
		"mlx5_cqe64 check_sum":                   CQEOffCheckSum,
		"mlx5_cqe64 hds_ip_ext":                  CQEOffHdsIPExt,
		"mlx5_cqe64 l4_l3_hdr_type":              CQEOffL4L3HdrType,
		"mlx5_cqe64 vlan_info":                   CQEOffVLANInfo,
		"mlx5_cqe64 srqn":                        CQEOffSRQN,
		"mlx5_cqe64 byte_cnt":                    CQEOffByteCnt,
		"mlx5_cqe64 timestamp_h":                 CQEOffTimestamp,
		"mlx5_cqe64 sop_drop_qpn":                CQEOffSopDropQPN,
		"mlx5_cqe64 wqe_counter":                 CQEOffWQECounter,
		"mlx5_cqe64 signature":                   CQEOffSignature,
		"mlx5_cqe64 op_own":                      CQEOffOpOwn,
		"mlx5_cqe64 sizeof":                      CQESize,
		"mlx5_err_cqe vendor_err_synd":           ErrCQEOffVendorErrSynd,
		"mlx5_err_cqe syndrome":                  ErrCQEOffSyndrome,
		"mlx5_mini_cqe8 checksum":                MiniOffCheckSum,
		"mlx5_mini_cqe8 rsvd":                    MiniOffStrideIdx, // the stride index lives in the CSUM format's reserved half
		"mlx5_mini_cqe8 byte_cnt":                MiniOffByteCnt,
		"mlx5_mini_cqe8 sizeof":                  MiniCQESize,
		"const MLX5_MINI_CQE_ARRAY_SIZE":         MiniCQEArraySize,
		"mlx5_wqe_srq_next_seg next_wqe_index":   RxWQEOffNextIndex,
		"mlx5_wqe_srq_next_seg sizeof":           RxWQEOffByteCount, // the data seg follows the next seg
		"mlx5_wqe_ctrl_seg opmod_idx_opcode":     CtrlOffOpmodIdxOpcode,
		"mlx5_wqe_ctrl_seg qpn_ds":               CtrlOffQPNDS,
		"mlx5_wqe_ctrl_seg signature":            CtrlOffSignature,
		"mlx5_wqe_ctrl_seg fm_ce_se":             CtrlOffFmCeSe,
		"mlx5_wqe_ctrl_seg general_id":           CtrlOffImm,
		"mlx5_wqe_ctrl_seg sizeof":               EthSegOff,
		"mlx5_wqe_eth_seg swp_outer_l4_offset":   EthOffSwpOuterL4,
		"mlx5_wqe_eth_seg cs_flags":              EthOffCsFlags,
		"mlx5_wqe_eth_seg swp_flags":             EthOffSwpFlags,
		"mlx5_wqe_eth_seg mss":                   EthOffMSS,
		"mlx5_wqe_eth_seg rsvd2":                 EthOffFlowTableMeta,
		"mlx5_wqe_eth_seg inline_hdr.sz":         EthOffInlineHdrSz,
		"mlx5_wqe_eth_seg inline_hdr.start":      EthOffInlineHdrStart,
		"mlx5_wqe_eth_seg sizeof":                DSSize,
		"mlx5_wqe_data_seg byte_count":           DataOffByteCount,
		"mlx5_wqe_data_seg lkey":                 DataOffLKey,
		"mlx5_wqe_data_seg addr":                 DataOffAddr,
		"mlx5_wqe_data_seg sizeof":               DSSize,
		"const MLX5_WQE_CTRL_DS_MASK":            CtrlDSMask,
		"const MLX5_WQE_CTRL_CQ_UPDATE":          CtrlCQUpdate,
		"const MLX5_ETH_WQE_L3_CSUM":             EthCsumL3,
		"const MLX5_ETH_WQE_L4_CSUM":             EthCsumL4,
		"const MLX5_OPCODE_NOP":                  OpNOP,
		"const MLX5_OPCODE_SEND":                 OpSend,
		"const MLX5_OPCODE_LSO":                  OpLSO,
		"const CQE_L2_OK":                        CQEL2OK,
		"const CQE_L3_OK":                        CQEL3OK,
		"const CQE_L4_OK":                        CQEL4OK,
		"const CQE_L4_HDR_TYPE_UDP":              CQEL4HdrUDP,
		"const CQE_L4_HDR_TYPE_TCP_ACK_AND_DATA": CQEL4HdrTCPAckD,
	}
	f, err := os.Open("testdata/upstream_layout.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 4 {
			t.Fatalf("bad row %q", line)
		}
		key := fs[0] + " " + fs[1]
		want, err := strconv.Atoi(fs[2])
		if err != nil {
			t.Fatalf("bad offset in %q", line)
		}
		got, ok := ours[key]
		if !ok {
			t.Errorf("%s: upstream row has no Go constant", key)
			continue
		}
		seen[key] = true
		if got != want {
			t.Errorf("%s: Go has %d, upstream %d", key, got, want)
		}
	}
	for k := range ours {
		if !seen[k] {
			t.Errorf("%s: Go constant has no upstream row", k)
		}
	}
	// Offsets must also keep multi-byte fields inside their structure.
	if CQEOffWQECounter+2 > CQEOffSignature || CQEOffByteCnt+4 > CQEOffTimestamp {
		t.Error("CQE fields overlap")
	}
}

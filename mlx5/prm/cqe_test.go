package prm

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDataPathLayout checks every data-path offset and constant of cqe.go
// against testdata/datapath_layout.txt (derived from the kernel and DPDK
// headers named in its first lines).
func TestDataPathLayout(t *testing.T) {
	ours := map[string]int{
		"mlx5_cqe64 wqe_id":                    CQEOffWQEID,
		"mlx5_cqe64 rss_hash_result":           CQEOffRSSHashResult,
		"mlx5_cqe64 rss_hash_type":             CQEOffRSSHashType,
		"mlx5_cqe64 check_sum":                 CQEOffCheckSum,
		"mlx5_cqe64 hds_ip_ext":                CQEOffHdsIPExt,
		"mlx5_cqe64 l4_l3_hdr_type":            CQEOffL4L3HdrType,
		"mlx5_cqe64 vlan_info":                 CQEOffVLANInfo,
		"mlx5_cqe64 byte_cnt":                  CQEOffByteCnt,
		"mlx5_cqe64 timestamp_h":               CQEOffTimestamp,
		"mlx5_cqe64 sop_drop_qpn":              CQEOffSopDropQPN,
		"mlx5_cqe64 wqe_counter":               CQEOffWQECounter,
		"mlx5_cqe64 signature":                 CQEOffSignature,
		"mlx5_cqe64 op_own":                    CQEOffOpOwn,
		"mlx5_cqe64 sizeof":                    CQESize,
		"mlx5_err_cqe syndrome":                ErrCQEOffSyndrome,
		"mlx5_mini_cqe8 checksum":              MiniOffCheckSum,
		"mlx5_mini_cqe8 rsvd":                  MiniOffStrideIdx,
		"mlx5_mini_cqe8 byte_cnt":              MiniOffByteCnt,
		"mlx5_mini_cqe8 sizeof":                MiniCQESize,
		"const MLX5_MINI_CQE_ARRAY_SIZE":       MiniCQEArraySize,
		"mlx5_wqe_srq_next_seg sizeof":         RxWQEOffByteCount,
		"mlx5_wqe_ctrl_seg opmod_idx_opcode":   WQECtrlOffOpmodIdxOpcode,
		"mlx5_wqe_ctrl_seg qpn_ds":             WQECtrlOffQPNDS,
		"mlx5_wqe_ctrl_seg fm_ce_se":           WQECtrlOffFmCeSe,
		"mlx5_wqe_ctrl_seg sizeof":             WQEEthSegOff,
		"mlx5_wqe_eth_seg inline_hdr.sz":       WQEEthOffInlineHdrSz,
		"mlx5_wqe_eth_seg inline_hdr.start":    WQEEthOffInlineHdrStr,
		"mlx5_wqe_eth_seg sizeof":              SendWQEDS,
		"mlx5_wqe_data_seg byte_count":         WQEDataOffByteCount,
		"mlx5_wqe_data_seg lkey":               WQEDataOffLKey,
		"mlx5_wqe_data_seg addr":               WQEDataOffAddr,
		"mlx5_wqe_data_seg sizeof":             SendWQEDS,
		"const MLX5_WQE_CTRL_DS_MASK":          WQECtrlDSMask,
		"const MLX5_WQE_CTRL_CQ_UPDATE":        2 << WQECtrlCEShift,
		"const MLX5_OPCODE_NOP":                SendOpNOP,
		"const MLX5_OPCODE_SEND":               SendOpSend,
		"const CQE_L2_OK":                      CQEL2OK,
		"const CQE_L3_OK":                      CQEL3OK,
		"const CQE_L4_OK":                      CQEL4OK,
		"const CQE_L4_HDR_TYPE_UDP":            CQEL4HdrUDP,
		"const MLX5_CQE_VLAN_STRIPPED":         CQEVLANStripped,
		"const MLX5_CQE_RX_IP_EXT_OPTS_PACKET": CQEIPExtOpts,
		"const MLX5_CQE_RX_IPV6_PACKET":        CQEL3HdrIPv6 << CQEL3HdrShift,
		"const MLX5_CQE_RX_IPV4_PACKET":        CQEL3HdrIPv4 << CQEL3HdrShift,
		"const MLX5_CQE_RX_TCP_PACKET":         CQEL4HdrTCP << CQEL4HdrShift,
		"const MLX5_CQE_RX_UDP_PACKET":         CQEL4HdrUDP << CQEL4HdrShift,
		"const MLX5_CQE_RX_IP_FRAG_PACKET":     CQEIPFrag,
		"const MLX5_OPCODE_ENHANCED_MPSW":      SendOpEnhancedMPSW,
		"const MLX5_CQE_OWNER_MASK":            CQEOwnerBit,
		"const MLX5_CQE_REQ":                   CQEOpReq,
		"const MLX5_CQE_RESP_SEND":             CQEOpRespSend,
		"const MLX5_CQE_REQ_ERR":               CQEOpReqErr,
		"const MLX5_CQE_RESP_ERR":              CQEOpRespErr,
		"const MLX5_CQE_INVALID":               CQEOpInvalid,
		"const MLX5_COMPRESSED":                CQEFormatComp,
		"const MLX5_SEND_WQE_DS":               SendWQEDS,
		"const MLX5_SEND_WQE_BB":               SendWQEBB,
		"const MLX5_RCV_DBR":                   RcvDoorbellOffset,
		"const MLX5_SND_DBR_BYTES":             SndDoorbellOffset,
		"const MLX5_INLINE_SEG":                WQEInlineSeg,
		"const MLX5_ESEG_MIN_INLINE_SIZE":      MinInlineL2,
	}
	f, err := os.Open("testdata/datapath_layout.txt")
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
		if got, ok := ours[key]; ok {
			seen[key] = true
			if got != want {
				t.Errorf("%s: prm has %d, upstream %d", key, got, want)
			}
		}
	}
	for k := range ours {
		if !seen[k] {
			t.Errorf("%s: not in the upstream table", k)
		}
	}
}

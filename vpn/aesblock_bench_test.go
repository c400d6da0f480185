package vpn

import (
	"crypto/aes"
	"crypto/cipher"
	"testing"
)

// BenchmarkAESBlocks is the measured part of the estimate of what a
// multi-packet AES-GCM would save (docs/vpn-datapath.md): AES-256-GCM
// encrypts one block per packet on its own (the tag mask, E(K, nonce‖1)),
// which waits for each of its 14 rounds in turn, where 8 packets' blocks
// could go through the rounds together. single: 8 one-block Encrypt calls,
// as 8 packets' tag masks cost today; pipelined: the same 8 blocks as one
// 128-byte CTR keystream, which crypto/cipher's assembly runs 8 blocks
// abreast. One op is 8 blocks.
func BenchmarkAESBlocks(b *testing.B) {
	key := make([]byte, 32)
	blk, err := aes.NewCipher(key)
	if err != nil {
		b.Fatal(err)
	}
	var src, dst [8 * aes.BlockSize]byte
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := 0; i < len(src); i += aes.BlockSize {
				blk.Encrypt(dst[i:i+aes.BlockSize], src[i:i+aes.BlockSize])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/8, "ns/block")
	})
	b.Run("pipelined", func(b *testing.B) {
		ctr := cipher.NewCTR(blk, make([]byte, aes.BlockSize))
		b.ReportAllocs()
		for b.Loop() {
			ctr.XORKeyStream(dst[:], src[:])
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/8, "ns/block")
	})
}

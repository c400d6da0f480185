package control

import (
	"encoding/binary"
	"errors"
)

// packet is one control packet after unwrapping (ssl_pkt.c
// write_control_auth, reliable.c reliable_ack_write):
// op|kid, the sender's session id, the ack array (with the receiver's
// session id when non-empty), the message-packet-id (absent in P_ACK_V1)
// and the payload (TLS bytes).
type packet struct {
	op      uint8
	keyID   uint8
	sid     [sessionIDLen]byte
	nAcks   int
	acks    [maxAcksParsed]uint32
	peerSID [sessionIDLen]byte
	msgID   uint32
	payload []byte // aliases the input
}

var (
	errShort      = errors.New("short packet")
	errOpcode     = errors.New("bad opcode")
	errTooManyAck = errors.New("more than 8 acks")
	errZeroSID    = errors.New("zero session id")
)

func isControlOpcode(op uint8) bool {
	return op >= opControlSoftResetV1 && op <= opControlWKCV1 && op != opDataV1 && op != opDataV2
}

// parseBody fills p from body, the bytes after the wrapping header
// (ack array, msg-id, payload).
func (p *packet) parseBody(body []byte) error {
	if len(body) < 1 {
		return errShort
	}
	n := int(body[0])
	if n > maxAcksParsed {
		return errTooManyAck
	}
	body = body[1:]
	p.nAcks = n
	if n > 0 {
		if len(body) < 4*n+sessionIDLen {
			return errShort
		}
		for i := 0; i < n; i++ {
			p.acks[i] = binary.BigEndian.Uint32(body[4*i:])
		}
		copy(p.peerSID[:], body[4*n:])
		body = body[4*n+sessionIDLen:]
	}
	if p.op == opAckV1 {
		if n == 0 {
			return errShort
		}
		p.payload = nil
		return nil
	}
	if len(body) < msgIDLen {
		return errShort
	}
	p.msgID = binary.BigEndian.Uint32(body)
	p.payload = body[msgIDLen:]
	return nil
}

// appendBody appends the ack array, msg-id and payload of p.
func (p *packet) appendBody(b []byte) []byte {
	b = append(b, byte(p.nAcks))
	for i := 0; i < p.nAcks; i++ {
		b = binary.BigEndian.AppendUint32(b, p.acks[i])
	}
	if p.nAcks > 0 {
		b = append(b, p.peerSID[:]...)
	}
	if p.op != opAckV1 {
		b = binary.BigEndian.AppendUint32(b, p.msgID)
		b = append(b, p.payload...)
	}
	return b
}

// bodyOverhead is the body size of a packet carrying nAcks acks and no payload.
func bodyOverhead(nAcks int) int {
	n := 1 + msgIDLen
	if nAcks > 0 {
		n += 4*nAcks + sessionIDLen
	}
	return n
}

func (p *packet) hasAck(id uint32) bool {
	for i := 0; i < p.nAcks; i++ {
		if p.acks[i] == id {
			return true
		}
	}
	return false
}

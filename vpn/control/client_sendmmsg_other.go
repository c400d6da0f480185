//go:build !linux

package control

import "net"

// mmsgState sends one datagram per packet where sendmmsg is missing.
type mmsgState struct{}

func (m *mmsgState) init(int) {}

func (m *mmsgState) send(conn *net.UDPConn, pkts [][]byte) (int, error) {
	for i, p := range pkts {
		if _, err := conn.Write(p); err != nil {
			return i, err
		}
	}
	return len(pkts), nil
}

package jepsen

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"
)

// The few memcached binary protocol requests the checker sends itself, on a fresh connection, so that what it
// sees is not hidden behind the SDK's retries: NOOP (is the KV service answering?) and STAT groups (has the
// bucket's persistence failed? how far is each vBucket?).
const (
	opGet          = 0x00
	opNoop         = 0x0a
	opStat         = 0x10
	opSaslAuth     = 0x21
	opGetReplica   = 0x83
	opSelectBucket = 0x89

	statusKeyNotFound = 0x01
)

// kvConn is one authenticated KV connection with a bucket selected.
type kvConn struct {
	conn   net.Conn
	opaque uint32
}

func dialKV(addr, bucket string, timeout time.Duration) (*kvConn, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	c := &kvConn{conn: conn}
	plain := append(append([]byte{0}, adminUser...), append([]byte{0}, adminPassword...)...)
	if err := c.expectOK(opSaslAuth, []byte("PLAIN"), plain); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := c.expectOK(opSelectBucket, []byte(bucket), nil); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *kvConn) close() { _ = c.conn.Close() }

type kvReply struct {
	status     uint16
	cas        uint64
	key, value []byte
}

func (c *kvConn) send(opcode byte, key, value []byte) (uint32, error) {
	return c.sendVB(opcode, 0, key, value)
}

func (c *kvConn) sendVB(opcode byte, vb uint16, key, value []byte) (uint32, error) {
	c.opaque++
	header := make([]byte, 24, 24+len(key)+len(value))
	header[0] = 0x80
	header[1] = opcode
	binary.BigEndian.PutUint16(header[2:], uint16(len(key)))
	binary.BigEndian.PutUint16(header[6:], vb)
	binary.BigEndian.PutUint32(header[8:], uint32(len(key)+len(value)))
	binary.BigEndian.PutUint32(header[12:], c.opaque)
	_, err := c.conn.Write(append(append(header, key...), value...))
	return c.opaque, err
}

func (c *kvConn) receive() (kvReply, error) {
	header := make([]byte, 24)
	if _, err := io.ReadFull(c.conn, header); err != nil {
		return kvReply{}, err
	}
	if header[0] != 0x81 && header[0] != 0x18 {
		return kvReply{}, fmt.Errorf("bad response magic %#x", header[0])
	}
	framing := 0
	keyLen := int(binary.BigEndian.Uint16(header[2:]))
	if header[0] == 0x18 {
		framing, keyLen = int(header[2]), int(header[3])
	}
	extras := int(header[4])
	bodyLen := int(binary.BigEndian.Uint32(header[8:]))
	if bodyLen > 1<<24 || framing+extras+keyLen > bodyLen {
		return kvReply{}, fmt.Errorf("bad response lengths")
	}
	body := make([]byte, bodyLen)
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return kvReply{}, err
	}
	start := framing + extras
	return kvReply{
		status: binary.BigEndian.Uint16(header[6:]),
		cas:    binary.BigEndian.Uint64(header[16:]),
		key:    body[start : start+keyLen],
		value:  body[start+keyLen:],
	}, nil
}

func (c *kvConn) expectOK(opcode byte, key, value []byte) error {
	if _, err := c.send(opcode, key, value); err != nil {
		return err
	}
	r, err := c.receive()
	if err != nil {
		return err
	}
	if r.status != 0 {
		return fmt.Errorf("opcode %#x answered status %#x", opcode, r.status)
	}
	return nil
}

// stats sends STAT `group` and collects the replies up to the empty one that ends it.
func (c *kvConn) stats(group string) (map[string]string, error) {
	if _, err := c.send(opStat, []byte(group), nil); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for {
		r, err := c.receive()
		if err != nil {
			return nil, err
		}
		if r.status != 0 {
			return nil, fmt.Errorf("STAT %q answered status %#x", group, r.status)
		}
		if len(r.key) == 0 {
			return out, nil
		}
		out[string(r.key)] = string(r.value)
	}
}

// probeKV opens a fresh connection to `addr` and sends a NOOP: how long the KV service took to answer, or why it
// did not.
func probeKV(addr, bucket string, timeout time.Duration) (time.Duration, error) {
	started := time.Now()
	c, err := dialKV(addr, bucket, timeout)
	if err != nil {
		return time.Since(started), err
	}
	defer c.close()
	err = c.expectOK(opNoop, nil, nil)
	return time.Since(started), err
}

// nodeStats reads one STAT group of `bucket` on `addr`.
func nodeStats(addr, bucket, group string) (map[string]string, error) {
	c, err := dialKV(addr, bucket, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.close()
	return c.stats(group)
}

// vbucketOf is the key's vBucket among 1024: CRC32 (IEEE) of the key, bits 16-30.
func vbucketOf(key string) uint16 {
	return uint16(((crc32.ChecksumIEEE([]byte(key)) >> 16) & 0x7fff) % 1024)
}

// copyOf is one node's copy of a document: found, its value (the body without extras) and CAS.
type copyOf struct {
	found bool
	value string
	cas   uint64
}

// getCopy reads `key` from the node's active (GET) or replica (GET_REPLICA) vBucket.
func (c *kvConn) getCopy(key string, replica bool) (copyOf, error) {
	opcode := byte(opGet)
	if replica {
		opcode = opGetReplica
	}
	if _, err := c.sendVB(opcode, vbucketOf(key), []byte(key), nil); err != nil {
		return copyOf{}, err
	}
	r, err := c.receive()
	if err != nil {
		return copyOf{}, err
	}
	switch r.status {
	case 0:
		return copyOf{found: true, value: string(r.value), cas: r.cas}, nil
	case statusKeyNotFound:
		return copyOf{}, nil
	default:
		return copyOf{}, fmt.Errorf("%s of %s answered status %#x", map[bool]string{false: "GET", true: "GET_REPLICA"}[replica], key, r.status)
	}
}

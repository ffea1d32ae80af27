package log

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/spl-dev/spl/records"
)

// Blobs and staged bodies through spl serve's door: the operations of
// DoorBlobRequest, sent in parts a request can carry.

// DoorCall sends one blob operation through the door (see
// DoorBlobRequest): for the sdk's blobs of runs, which a door log may not
// write to their bucket itself.
func (l *Log) DoorCall(ctx context.Context, op string, req DoorBlobRequest) (DoorBlobReply, error) {
	if l.door == nil {
		return DoorBlobReply{}, ErrNoDoor
	}
	subject, err := l.door.subject(op)
	if err != nil {
		return DoorBlobReply{}, err
	}
	var rep DoorBlobReply
	if err := l.doorCall(ctx, subject, req, &rep, l.door.timeout(len(req.Data))); err != nil {
		return DoorBlobReply{}, fmt.Errorf("%s %s: %w", op, req.Name, err)
	}
	if rep.Err != nil {
		return DoorBlobReply{}, rep.Err
	}
	return rep, nil
}

// DoorBodies is the bucket of DoorBlobPut that stages the body of a record
// too large for one request, named by its body digest in hex, for the
// DoorAppend that follows it (whose item is the record as
// records.MarshalOutside writes it). The server keeps a staged body for a
// minute, for that append and its retries.
const DoorBodies = "spl.bodies"

// putBody stages rec's body on the server, in parts, ahead of its append.
func (d *door) putBody(ctx context.Context, rec *records.Record) error {
	if err := d.l.DoorPut(ctx, DoorBodies, hex.EncodeToString(rec.Header.BD[:]), rec.Body); err != nil {
		return fmt.Errorf("put body: %w", err)
	}
	return nil
}

// DoorPut puts data under name in bucket through the door, in parts of
// DoorPart bytes (DoorBlobPut): a run's blob, or a body staged for its
// record's append (DoorBodies).
func (l *Log) DoorPut(ctx context.Context, bucket, name string, data []byte) error {
	part := l.DoorPart()
	for off := 0; ; off += part {
		end := min(off+part, len(data))
		req := DoorBlobRequest{Bucket: bucket, Name: name, Offset: int64(off), Size: int64(len(data)), Data: data[off:end]}
		if _, err := l.DoorCall(ctx, DoorBlobPut, req); err != nil {
			return err
		}
		if end == len(data) {
			return nil
		}
	}
}

// DoorPart is the most a blob operation carries in one request: a part
// of a blob, well under the server's largest request.
func (l *Log) DoorPart() int {
	if l.door == nil {
		return DoorPartOf(0)
	}
	return DoorPartOf(l.door.info.MaxRequest)
}

// DoorPartOf is the part of a blob one request carries to or from a
// server whose largest request is maxRequest bytes (0: not known): half
// of it, at least 64 KiB; 1 MiB when unknown. The one rule of both sides
// of the door.
func DoorPartOf(maxRequest int) int {
	if maxRequest <= 0 {
		return 1 << 20
	}
	return max(maxRequest/2, 64<<10)
}

package serve

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/nats-io/nats.go"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// The door (log/door.go): the request/reply service through which NATS
// clients write. It decodes what a client sends and hands it to the
// service layer (sdk.Client.SubmitRecord, EraseRecord, PutBlob, GetBlob),
// which decides everything; the door only answers. The right a request
// has is the subject it reached: the NATS server's permissions let the
// write right publish to the door's write subjects alone, and the admin
// right to every subject.

// Bounds of the door.
const (
	doorInFlight   = 256      // requests handled at once; more wait their turn
	doorMaxItems   = 1000     // records in one append request
	doorMaxBlob    = 64 << 20 // bytes of one blob put through the door
	doorMaxUploads = 16       // blob puts in parts under way at once
	doorUploadTTL  = time.Minute
)

// door serves the door's subjects on a connection of its own.
type door struct {
	s    *Server
	nc   *nats.Conn
	subs []*nats.Subscription
	slot chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	uploads map[string]*upload // blob puts in parts, by name
	staged  map[string]*upload // bodies staged for their records' appends (splog.DoorBodies), by name
}

// upload is a blob put in parts, gathered until it is whole.
type upload struct {
	data    []byte
	size    int64
	expires time.Time
}

// startDoor subscribes the door. Requests that come before the log is
// open wait for it, up to the log's timeout.
func (s *Server) startDoor() error {
	opts := append([]nats.Option{nats.InProcessServer(s.ns), nats.Name("spl-door")}, s.own...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return fmt.Errorf("door: %w", err)
	}
	d := &door{s: s, nc: nc, slot: make(chan struct{}, doorInFlight), uploads: make(map[string]*upload), staged: make(map[string]*upload)}
	for _, right := range []string{splog.DoorAdmin, splog.DoorWrite} {
		sub, err := nc.QueueSubscribe(splog.DoorSubject(right, ">"), splog.DoorQueue, d.receive)
		if err != nil {
			nc.Close()
			return fmt.Errorf("door: %w", err)
		}
		sub.SetPendingLimits(-1, 64<<20)
		d.subs = append(d.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return fmt.Errorf("door: %w", err)
	}
	s.door = d
	return nil
}

// stop ends the door: no new request is taken, and the ones in flight
// finish first.
func (d *door) stop() {
	for _, sub := range d.subs {
		_ = sub.Unsubscribe()
	}
	d.wg.Wait()
	d.nc.Close()
}

// receive hands a request to a goroutine of its own, at most doorInFlight
// at once, so that a slow append holds up no other.
func (d *door) receive(m *nats.Msg) {
	at := time.Now()
	d.slot <- struct{}{}
	d.wg.Add(1)
	go func() {
		defer func() { <-d.slot; d.wg.Done() }()
		d.serve(m, at)
	}()
}

// serve answers one request, received at at.
func (d *door) serve(m *nats.Msg, at time.Time) {
	rest := strings.TrimPrefix(m.Subject, splog.DoorPrefix+".")
	right, op, _ := strings.Cut(rest, ".")
	// The log's timeout (its default when unset), and a second more per
	// MiB the request carries, as the client gives it.
	timeout := cmp.Or(d.s.cfg.Timeout, 10*time.Second) + time.Duration(len(m.Data)>>20)*time.Second
	ctx, cancel := context.WithDeadline(d.s.bg, at.Add(timeout))
	defer cancel()
	if right == splog.DoorAdmin {
		ctx = sdk.AsAdmin(ctx)
	}
	var reply any
	c, err := d.s.doorClient(ctx)
	if err == nil {
		reply, err = d.dispatch(ctx, c, op, m.Data, at)
	}
	if err != nil {
		reply = struct {
			Err *splog.DoorError `cbor:"err"`
		}{splog.NewDoorError(err)}
	}
	data, err := cbor.Marshal(reply)
	if err != nil {
		d.s.logger.Error("door: encode answer", "op", op, "err", err)
		return
	}
	if err := m.Respond(data); err != nil {
		d.s.logger.Warn("door: answer", "op", op, "err", err)
	}
}

// doorClient waits for the log to open, as long as ctx allows.
func (s *Server) doorClient(ctx context.Context) (*sdk.Client, error) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("door: the log is not open yet: %w", ctx.Err())
	}
	if s.stopping.Load() {
		return nil, fmt.Errorf("door: %w: the server is shutting down", splog.ErrClosed)
	}
	return s.c.Load(), nil
}

// dispatch runs operation op of the request data, received at at.
func (d *door) dispatch(ctx context.Context, c *sdk.Client, op string, data []byte, at time.Time) (any, error) {
	switch op {
	case splog.DoorInfo:
		// The server's mark, which no client of the door can read: a
		// stream deleted or purged behind the log's back is reported as
		// loss to whoever opens the log (spl verify), never as empty.
		// A mark that cannot be read now (a stream leader being elected)
		// says nothing: the open goes on, and verify asks again.
		loss, err := c.CheckMark(ctx)
		if err != nil {
			d.s.logger.Warn("door: info: check mark", "err", err)
		}
		return splog.DoorInfoReply{Stream: c.StreamName(), MaxRequest: int(d.s.nopts.MaxPayload), Loss: splog.DoorLossOf(loss)}, nil
	case splog.DoorAppend:
		var req splog.DoorAppendRequest
		if err := decodeDoor(data, &req); err != nil {
			return nil, err
		}
		return d.append(ctx, c, req, at)
	case splog.DoorErase:
		var req splog.DoorEraseRequest
		if err := decodeDoor(data, &req); err != nil {
			return nil, err
		}
		return d.erase(ctx, c, req)
	case splog.DoorBlobPut, splog.DoorBlobGet:
		var req splog.DoorBlobRequest
		if err := decodeDoor(data, &req); err != nil {
			return nil, err
		}
		if op == splog.DoorBlobGet {
			return d.blobGet(ctx, c, req)
		}
		return d.blobPut(ctx, c, req)
	}
	return nil, &records.FieldError{Field: "subject", Rule: fmt.Sprintf("the door has no operation %q", op)}
}

// doorDecMode decodes requests strictly: a duplicate or unknown key is
// refused, not taken for something else.
var doorDecMode, _ = cbor.DecOptions{
	DupMapKey:         cbor.DupMapKeyEnforcedAPF,
	ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	MaxArrayElements:  doorMaxItems,
}.DecMode()

func decodeDoor(data []byte, v any) error {
	if err := doorDecMode.Unmarshal(data, v); err != nil {
		return &records.FieldError{Field: "request", Rule: fmt.Sprintf("not a door request: %v", err)}
	}
	return nil
}

// append hands every record of req, received at at, to the service layer,
// then waits for them all: they are group-committed together.
func (d *door) append(ctx context.Context, c *sdk.Client, req splog.DoorAppendRequest, at time.Time) (splog.DoorAppendReply, error) {
	if req.Budget > 0 {
		// Half the client's wait from when the request came: the rest is
		// room for its way here and the answer's way back. Past the
		// client's wait, it may send a record again, and a lost race of
		// the first copy must not be retried then (log.door.settle).
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, at.Add(time.Duration(req.Budget)*time.Millisecond/2))
		defer cancel()
	}
	rep := splog.DoorAppendReply{Results: make([]splog.DoorResult, len(req.Items))}
	type sent struct {
		p      *splog.Pending
		stored bool // the service layer changed the record
	}
	pending := make([]sent, len(req.Items))
	for i, it := range req.Items {
		rec, err := d.record(it)
		if err == nil {
			var out *records.Record
			pending[i].p, out, err = c.SubmitRecord(ctx, rec, it.Cond, it.After)
			pending[i].stored = out != rec
		}
		if err != nil {
			rep.Results[i].Err = splog.NewDoorError(err)
		}
	}
	for i, s := range pending {
		if s.p == nil {
			continue
		}
		e, err := s.p.Wait(ctx)
		if err != nil {
			rep.Results[i].Err = splog.NewDoorError(err)
			continue
		}
		if records.Packed(req.Items[i].Record) {
			d.unstage(e.Record.Header.BD) // landed: no retry needs it
		}
		r := &rep.Results[i]
		r.ID, r.Clock = e.ID.Bytes(), e.Clock
		if !e.Record.Header.Prev.IsZero() {
			r.Prev = e.Record.Header.Prev.Bytes()
		}
		if s.stored {
			marshal := e.Record.Marshal
			if !e.Record.Inline() {
				marshal = e.Record.MarshalOutside // the client reads the body from the log
			}
			data, err := marshal()
			if err != nil {
				r.Err = splog.NewDoorError(err)
				continue
			}
			r.Stored = data
		}
	}
	return rep, nil
}

// unstage drops the staged body whose digest is bd.
func (d *door) unstage(bd [32]byte) {
	d.mu.Lock()
	delete(d.staged, hex.EncodeToString(bd[:]))
	d.mu.Unlock()
}

// record decodes a record a client sent, with its signature, and with
// the body it staged when it sent the record without (splog.DoorBodies).
func (d *door) record(it splog.DoorItem) (*records.Record, error) {
	var rec *records.Record
	var err error
	if records.Packed(it.Record) {
		var st records.Stored
		if rec, st, err = records.UnmarshalStored(it.Record); err != nil {
			return nil, &records.FieldError{Field: "rec", Rule: fmt.Sprintf("not an spl record: %v", err)}
		}
		if !st.Outside || st.ZSize > 0 {
			return nil, &records.FieldError{Field: "rec", Rule: "the door takes a record whole, or with its body staged as is"}
		}
		size := st.Size
		name := hex.EncodeToString(rec.Header.BD[:])
		d.mu.Lock()
		u := d.staged[name]
		d.mu.Unlock()
		if u == nil {
			return nil, &records.FieldError{Field: "rec", Rule: fmt.Sprintf("its body (%s) is not staged: put it in %s first, at most %s before the append", name, splog.DoorBodies, doorUploadTTL)}
		}
		if err := rec.AttachBody(u.data, size); err != nil {
			return nil, &records.FieldError{Field: "rec", Rule: fmt.Sprintf("the staged body: %v", err)}
		}
	} else if rec, err = records.Unmarshal(it.Record); err != nil {
		return nil, &records.FieldError{Field: "rec", Rule: fmt.Sprintf("not an spl record: %v", err)}
	}
	if it.Sig != "" {
		if rec.Sig, err = records.ParseSignature(it.Sig); err != nil {
			return nil, &records.FieldError{Field: "signature", Rule: err.Error()}
		}
	}
	return rec, nil
}

// erase hands an erasure record to the service layer.
func (d *door) erase(ctx context.Context, c *sdk.Client, req splog.DoorEraseRequest) (splog.DoorEraseReply, error) {
	rec, err := d.record(req.Item)
	if err != nil {
		return splog.DoorEraseReply{}, err
	}
	res, err := c.EraseRecord(ctx, rec, req.Item.Cond, req.Item.After)
	if err != nil {
		return splog.DoorEraseReply{}, err
	}
	rep := splog.DoorEraseReply{ID: res.Erasure.ID.Bytes(), Clock: res.Erasure.Clock}
	if r := res.Erasure.Record; r != nil && !r.Header.Prev.IsZero() {
		rep.Prev = r.Header.Prev.Bytes()
	}
	for _, id := range res.Erased {
		rep.Erased = append(rep.Erased, id.Bytes())
	}
	for _, id := range res.Already {
		rep.Already = append(rep.Already, id.Bytes())
	}
	return rep, nil
}

// blobPut takes one part of a blob; the last part stores it, or stages
// it for its record's append when it is a body (splog.DoorBodies).
func (d *door) blobPut(ctx context.Context, c *sdk.Client, req splog.DoorBlobRequest) (splog.DoorBlobReply, error) {
	body := req.Bucket == splog.DoorBodies
	if body && req.Size > 0 {
		// Its record holds it, and more: the log's size rule, now.
		if err := splog.CheckSize(int(min(req.Size, int64(records.MaxRecordSize)+1)), d.s.cfg.MaxRecord); err != nil {
			return splog.DoorBlobReply{}, err
		}
	}
	if req.Size < 0 || !body && req.Size > doorMaxBlob {
		return splog.DoorBlobReply{}, &records.FieldError{Field: "size", Rule: fmt.Sprintf("a blob put through the door is at most %d bytes, not %d", doorMaxBlob, req.Size)}
	}
	store := func(data []byte) error {
		if !body {
			return c.PutBlob(ctx, req.Bucket, req.Name, data)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.staged) >= doorMaxUploads {
			return fmt.Errorf("body %s: %d bodies are staged already: try again later", req.Name, doorMaxUploads)
		}
		d.staged[req.Name] = &upload{data: data, size: req.Size, expires: time.Now().Add(doorUploadTTL)}
		return nil
	}
	d.mu.Lock()
	now := time.Now()
	for _, m := range []map[string]*upload{d.uploads, d.staged} {
		for name, u := range m {
			if now.After(u.expires) {
				delete(m, name)
			}
		}
	}
	if req.Offset == 0 && int64(len(req.Data)) == req.Size {
		d.mu.Unlock()
		return splog.DoorBlobReply{}, store(req.Data)
	}
	u := d.uploads[req.Name]
	switch {
	case u == nil && req.Offset != 0:
		d.mu.Unlock()
		return splog.DoorBlobReply{}, &records.FieldError{Field: "offset", Rule: fmt.Sprintf("blob %s: no put of it is under way; start at offset 0", req.Name)}
	case u == nil && len(d.uploads) >= doorMaxUploads:
		d.mu.Unlock()
		return splog.DoorBlobReply{}, fmt.Errorf("blob %s: %d puts in parts are under way already: try again later", req.Name, doorMaxUploads)
	case u == nil:
		u = &upload{size: req.Size}
		d.uploads[req.Name] = u
	}
	if req.Offset != int64(len(u.data)) || req.Size != u.size || int64(len(u.data)+len(req.Data)) > u.size {
		delete(d.uploads, req.Name)
		d.mu.Unlock()
		return splog.DoorBlobReply{}, &records.FieldError{Field: "offset", Rule: fmt.Sprintf("blob %s: part at %d of %d bytes does not follow the %d bytes sent", req.Name, req.Offset, req.Size, len(u.data))}
	}
	u.data = append(u.data, req.Data...)
	u.expires = now.Add(doorUploadTTL)
	whole := int64(len(u.data)) == u.size
	if whole {
		delete(d.uploads, req.Name)
	}
	d.mu.Unlock()
	if !whole {
		return splog.DoorBlobReply{}, nil
	}
	return splog.DoorBlobReply{}, store(u.data)
}

// blobGet answers one part of a blob, as large as the door's parts are.
func (d *door) blobGet(ctx context.Context, c *sdk.Client, req splog.DoorBlobRequest) (splog.DoorBlobReply, error) {
	data, err := c.GetBlob(ctx, req.Bucket, req.Name)
	if err != nil {
		return splog.DoorBlobReply{}, err
	}
	if req.Offset < 0 || req.Offset > int64(len(data)) {
		return splog.DoorBlobReply{}, &records.FieldError{Field: "offset", Rule: fmt.Sprintf("blob %s has %d bytes; offset %d is past them", req.Name, len(data), req.Offset)}
	}
	part := splog.DoorPartOf(int(d.s.nopts.MaxPayload))
	end := min(req.Offset+int64(part), int64(len(data)))
	return splog.DoorBlobReply{Size: int64(len(data)), Data: data[req.Offset:end]}, nil
}

package natsengine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names are the NATS names an engine and its workers share. The zero
// value means the defaults; both sides must use the same names.
type Names struct {
	// Prefix of every subject: PREFIX.work.ID or PREFIX.work.batch-TOKEN
	// (invocations), PREFIX.result.ENGINE.ID or .batch-TOKEN (outcomes),
	// PREFIX.cancel.ID (an engine gave up), PREFIX.beat.ENGINE.ID or
	// .batch-TOKEN (heartbeats), PREFIX.want.ENGINE (the want question).
	// Default "hg".
	Prefix string
	// Stream is the work-queue stream of invocations. Default "HG_WORK".
	Stream string
	// Consumer is the durable pull consumer all workers share. Default
	// "hg-workers".
	Consumer string
	// Results is the work-queue stream of notices and outcomes; each
	// engine reads its own subjects. Default "HG_RESULTS".
	Results string
	// Bucket is the Object Store holding block lists too big for a
	// message. Default "HG_BLOBS".
	Bucket string
	// Blocks is the Object Store holding workspace blocks, each an
	// object named by its CID ([BlockObject]). Default "HG_BLOCKS".
	Blocks string
	// Replicas is how many servers of a JetStream cluster keep each of
	// the streams and buckets, when this side is the one to create them
	// (an existing one is used as it is); their consumers inherit it.
	// Default 1; a cluster that must survive the loss of a server wants 3.
	Replicas int
}

func (n Names) withDefaults() Names {
	if n.Prefix == "" {
		n.Prefix = "hg"
	}
	if n.Stream == "" {
		n.Stream = "HG_WORK"
	}
	if n.Consumer == "" {
		n.Consumer = "hg-workers"
	}
	if n.Results == "" {
		n.Results = "HG_RESULTS"
	}
	if n.Bucket == "" {
		n.Bucket = "HG_BLOBS"
	}
	if n.Blocks == "" {
		n.Blocks = "HG_BLOCKS"
	}
	return n
}

func (n Names) workSubject(id string) string   { return n.Prefix + ".work." + id }
func (n Names) resultPrefix() string           { return n.Prefix + ".result." }
func (n Names) cancelSubject(id string) string { return n.Prefix + ".cancel." + id }
func (n Names) beatPrefix() string             { return n.Prefix + ".beat." }
func (n Names) wantSubject(engine string) string {
	return n.Prefix + ".want." + engine
}

// ErrNoJetStream is returned by [New] and [Serve] when the NATS server
// does not have JetStream enabled (nats-server without -js).
var ErrNoJetStream = errors.New("the NATS server does not have JetStream enabled")

// Retention backstops: an engine deletes what it is done with, and these
// bound what is left behind by engines that died.
const (
	// keepFor bounds the age of work messages and results nobody took.
	keepFor = 24 * time.Hour
	// objectTTL bounds the age of Object Store objects. A package object
	// older than half of it is put again before it is handed out.
	objectTTL = 24 * time.Hour
	// defaultInlineLimit is the largest message body sent as is; bigger
	// block lists go to the Object Store.
	defaultInlineLimit = 512 << 10
	// headroom is left below the server's max payload for headers.
	headroom = 8 << 10
)

// setup makes sure the streams and the bucket exist; whoever comes first
// creates them, and an existing one is used as it is.
func setup(ctx context.Context, js jetstream.JetStream, n Names) (jetstream.ObjectStore, error) {
	// A server without JetStream answers no JetStream request: said
	// plainly, rather than as a failed stream lookup. Any other error
	// here is left to the lookups below.
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := js.AccountInfo(actx)
	cancel()
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return nil, fmt.Errorf("natsengine: %w", ErrNoJetStream)
	}
	if err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name: n.Stream, Subjects: []string{n.Prefix + ".work.>"}, Retention: jetstream.WorkQueuePolicy,
		MaxAge: keepFor, Duplicates: 10 * time.Minute, Replicas: n.Replicas,
		Description: "hg: Haygent invocations, each taken by one worker",
	}); err != nil {
		return nil, err
	}
	if err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name: n.Results, Subjects: []string{n.resultPrefix() + ">"}, Retention: jetstream.WorkQueuePolicy,
		MaxAge: keepFor, Replicas: n.Replicas,
		Description: "hg: notices and outcomes of invocations, each read by the engine that sent it",
	}); err != nil {
		return nil, err
	}
	obs, err := js.ObjectStore(ctx, n.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: n.Bucket, TTL: objectTTL, Replicas: n.Replicas, Description: "hg: block lists too big for a message",
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			obs, err = js.ObjectStore(ctx, n.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natsengine: object store %s: %w", n.Bucket, err)
	}
	return obs, nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	_, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			_, err = js.Stream(ctx, cfg.Name) // created meanwhile by someone else
		}
	}
	if err != nil {
		return fmt.Errorf("natsengine: stream %s: %w", cfg.Name, err)
	}
	return nil
}

// newID returns a new invocation or engine id: 32 hex digits.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// inlineLimit is the largest body sent in a message.
func inlineLimit(want int, maxPayload int64) int {
	if want <= 0 {
		want = defaultInlineLimit
	}
	if maxPayload > headroom && int64(want) > maxPayload-headroom {
		want = int(maxPayload - headroom)
	}
	return want
}

// lastToken returns the last token of a subject.
func lastToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const (
	// delayQueue is the first nfnetlink queue number a delay binds in
	// its device's namespace; each further delay on the same device (in
	// this process or another) takes the next free one, up to
	// delayQueues of them.
	delayQueue  = 3200
	delayQueues = 16
	// delayMaxLen bounds the packets the kernel holds for one delay; more
	// pass at once (fail open), as does everything when no reader is
	// bound. At 1,000 ms that is 4,096 packets a second of a lab's
	// probes, far above what they send.
	delayMaxLen = 4096
	// delayPoll is how often a delay checks that its chain is still
	// there: `prober lab clear` in another process deletes it.
	delayPoll = time.Second
)

// delayer holds one delay fault's packets: the kernel queues each packet
// the device forwards to its socket, and it accepts each one once its
// time is due, in arrival order.
type delayer struct {
	prefix, ns, chain string
	queue             uint16
	hold              time.Duration
	conn              *netlink.Conn
	logger            *slog.Logger
	stop              context.CancelFunc
	done              chan struct{} // closed when every goroutine has ended and the socket is closed
	stats             delayStats
}

// delayStats count what a delay did, logged as it ends: a lab delay that
// lets packets pass unheld is not the fault the scenario asked for.
type delayStats struct {
	held    atomic.Uint64 // packets held their time
	unheld  atomic.Uint64 // let go at once: fifo full
	skipped atomic.Uint64 // passed by the kernel: our socket was full
	refused atomic.Uint64 // verdicts the kernel refused
	late    atomic.Uint64 // let go more than delayLate after their time
	lag     lagStats      // from the kernel's stamp to our read
}

// lagStats sums how long stamped packets waited for the reader.
type lagStats struct {
	n, sum, max atomic.Int64 // packets; nanoseconds
}

func (l *lagStats) add(d time.Duration) {
	l.n.Add(1)
	l.sum.Add(int64(d))
	for {
		m := l.max.Load()
		if int64(d) <= m || l.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// mean is the mean lag, 0 with none.
func (l *lagStats) mean() time.Duration {
	if n := l.n.Load(); n > 0 {
		return time.Duration(l.sum.Load() / n)
	}
	return 0
}

// delayLate is how late a release counts as late.
const delayLate = 5 * time.Millisecond

// held is one packet waiting for its time.
type held struct {
	id  uint32
	due time.Time
}

// injectDelay binds a queue in the device's namespace, then adds the rule
// that queues to it, then starts holding: a packet is never queued before
// a reader is there, and the bypass flag lets packets pass whenever none
// is.
func (f *Fabric) injectDelay(ft Fault, d dropper) error {
	ns := nsName(f.Spec.Prefix, ft.Device)
	conn, queue, err := bindQueue(ns)
	if err != nil {
		return err
	}
	chains, err := d.installChains(ns, ft.Kind, hookRules{forward: [][]expr.Any{rule(d.only, queueNative(queue))}})
	if errors.Is(err, unix.ENOENT) {
		// No nft_queue in this kernel (CONFIG_NFT_QUEUE unset, as on the
		// lab's 6.18): iptables' NFQUEUE target through nft_compat, as
		// iptables-nft installs it, does the same.
		chains, err = d.installChains(ns, ft.Kind, hookRules{forward: [][]expr.Any{rule(d.only, queueCompat(queue))}})
	}
	if err != nil {
		conn.Close()
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	dl := &delayer{
		prefix: f.Spec.Prefix, ns: ns, chain: chains[0], queue: queue,
		hold: time.Duration(ft.Millis) * time.Millisecond, conn: conn,
		logger: f.logger.With("prefix", f.Spec.Prefix, "device", ft.Device, "queue", queue),
		stop:   stop, done: make(chan struct{}),
	}
	hs := f.holds
	hs.mu.Lock()
	hs.list = append(hs.list, dl)
	hs.mu.Unlock()
	go dl.run(ctx, hs)
	return nil
}

// queue num N bypass: to queue N, or on when no socket is bound.
func queueNative(num uint16) []expr.Any {
	return []expr.Any{&expr.Queue{Num: num, Flag: expr.QueueFlagBypass}}
}

// The same as xtables' NFQUEUE target, revision 3: struct xt_NFQ_info_v3
// {u16 queuenum; u16 queues_total; u16 flags}, host order, padded to
// XT_ALIGN's 8 bytes; NFQ_FLAG_BYPASS is 1.
func queueCompat(num uint16) []expr.Any {
	info := make([]byte, 8)
	binary.NativeEndian.PutUint16(info[0:], num)
	binary.NativeEndian.PutUint16(info[2:], 1)
	binary.NativeEndian.PutUint16(info[4:], 1)
	return []expr.Any{&expr.Target{Name: "NFQUEUE", Rev: 3, Info: (*xt.Unknown)(&info)}}
}

// bindQueue opens a netfilter netlink socket in namespace ns and binds
// the first free queue number from delayQueue on. The socket stays in ns
// for its whole life.
func bindQueue(ns string) (*netlink.Conn, uint16, error) {
	fd, err := netns.GetFromName(ns)
	if err != nil {
		return nil, 0, fmt.Errorf("netns %s: %w", ns, err)
	}
	defer fd.Close()
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(fd)})
	if err != nil {
		return nil, 0, fmt.Errorf("netns %s: nfqueue socket: %w", ns, err)
	}
	config := func(queue uint16, data []byte) error {
		_, err := conn.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(nfqType(nfqMsgConfig)), Flags: netlink.Request | netlink.Acknowledge},
			Data:   data,
		})
		return err
	}
	for queue := uint16(delayQueue); queue < delayQueue+delayQueues; queue++ {
		err := config(queue, nfqCmd(queue, nfqCmdBind))
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBUSY) {
			continue // another socket holds it: another delay on this device
		}
		if err == nil {
			err = config(queue, nfqConfig(queue, delayMaxLen))
		}
		if err == nil {
			// A full socket buffer makes the kernel pass the packet (fail
			// open), not an error for us.
			err = conn.SetOption(netlink.NoENOBUFS, true)
		}
		if err == nil {
			err = forceReadBuffer(conn, delayReadBuffer)
		}
		if err != nil {
			conn.Close()
			return nil, 0, fmt.Errorf("netns %s: nfqueue %d: %w", ns, queue, err)
		}
		return conn, queue, nil
	}
	conn.Close()
	return nil, 0, fmt.Errorf("netns %s: nfqueue %d..%d all taken: at most %d delays per device", ns, delayQueue, delayQueue+delayQueues-1, delayQueues)
}

// delayReadBuffer is the queue socket's receive buffer. Each queued
// packet takes about a kilobyte of it; a reader held off the CPU for a
// while on a loaded machine must not find it full, or the kernel lets
// packets pass unheld (fail open). SO_RCVBUFFORCE: this socket's own
// limit, above the namespace's rmem_max, which we leave alone.
const delayReadBuffer = 16 << 20

// forceReadBuffer sets conn's receive buffer to n bytes past rmem_max.
func forceReadBuffer(conn *netlink.Conn, n int) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
	}); err != nil {
		return err
	}
	return serr
}

// run reads, releases and watches until ctx ends or one of them fails,
// then lets every packet still queued go and closes the socket.
func (dl *delayer) run(ctx context.Context, hs *holdSet) {
	defer close(dl.done)
	defer hs.forget(dl)
	dl.logger.Info("lab delay holding", "chain", dl.chain, "millis", dl.hold.Milliseconds())
	fifo := make(chan held, delayMaxLen)
	last := make(chan uint32, 1) // the last id read, once read ends
	stopRead := context.AfterFunc(ctx, func() { dl.conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stopRead()
	var wg sync.WaitGroup
	wg.Go(func() { last <- dl.read(ctx, fifo) })
	wg.Go(func() { dl.release(ctx, fifo) })
	wg.Go(func() { dl.watch(ctx) })
	wg.Wait()
	// Whatever the kernel still holds goes now, read or not: a batch
	// verdict accepts every queued id up to the one given, in sequence
	// space, so up to 2^30 past the last one read.
	upTo := <-last + 1<<30
	if _, err := dl.verdicts(nfqVerdict(dl.queue, upTo, nfAccept), nfqType(nfqMsgVerdictBatch)); err != nil {
		dl.logger.Warn("lab delay release", "err", err)
	}
	if err := dl.conn.Close(); err != nil {
		dl.logger.Warn("lab delay close", "err", err)
	}
	st := &dl.stats
	attrs := []any{"held", st.held.Load(), "unheld", st.unheld.Load(), "skipped", st.skipped.Load(),
		"refused", st.refused.Load(), "late", st.late.Load(),
		"stamped", st.lag.n.Load(), "lag_mean", st.lag.mean(), "lag_max", time.Duration(st.lag.max.Load())}
	if st.unheld.Load()+st.skipped.Load()+st.late.Load() > 0 || time.Duration(st.lag.max.Load()) > dl.hold {
		dl.logger.Warn("lab delay ended, not every packet held its time", attrs...)
	} else {
		dl.logger.Info("lab delay ended", attrs...)
	}
}

// read hands each packet the kernel queues to release, due hold from now,
// until ctx ends; it closes fifo and returns the last id it read. When
// fifo is full it lets the packet go at once. It reads the socket itself
// (nfqParse): a datagram that holds a refused verdict's error beside
// packets must not lose the packets, or the kernel holds them forever.
func (dl *delayer) read(ctx context.Context, fifo chan<- held) (last uint32) {
	defer close(fifo)
	rc, err := dl.conn.SyscallConn()
	if err != nil {
		dl.logger.Warn("lab delay read", "err", err)
		dl.stop()
		return 0
	}
	buf := make([]byte, 1<<16)
	var pkts []nfqPkt
	var errs []int32
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			return rerr != unix.EAGAIN
		})
		switch {
		case ctx.Err() != nil:
			return last
		case err == nil && rerr == unix.ENOBUFS:
			continue // the kernel says it passed some: counted by id below
		case err == nil && rerr != nil:
			err = rerr
		}
		if err != nil {
			dl.logger.Warn("lab delay read", "err", err)
			dl.stop()
			return last
		}
		now := time.Now()
		pkts, errs, err = nfqParse(buf[:n], pkts[:0], errs[:0])
		if err != nil {
			dl.logger.Debug("lab delay message", "err", err)
		}
		for _, e := range errs {
			// ENOENT: a verdict for a packet the kernel no longer holds:
			// it drops every queued packet of the namespace when any
			// netfilter hook there goes away (nf_queue_nf_hook_drop).
			dl.stats.refused.Add(1)
			if e != int32(unix.ENOENT) {
				dl.logger.Debug("lab delay verdict refused", "err", unix.Errno(e))
			}
		}
		for _, pk := range pkts {
			// The kernel numbers every packet it queues; one it could not
			// hand over (our socket full) it let pass at once.
			if last != 0 && pk.id > last+1 {
				dl.stats.skipped.Add(uint64(pk.id - last - 1))
			}
			last = pk.id
			// A packet is due hold after it reached the device when the
			// kernel stamped it: time spent waiting for this reader on a
			// loaded machine is part of the hold, not added to it.
			due := now.Add(dl.hold)
			if lag := now.Sub(time.Unix(0, pk.stamp)); pk.stamp != 0 && lag >= 0 && lag < time.Second {
				due = due.Add(-lag)
				dl.stats.lag.add(lag)
			}
			select {
			case fifo <- held{id: pk.id, due: due}:
				dl.stats.held.Add(1)
			default:
				dl.stats.unheld.Add(1)
				dl.verdicts(nfqVerdict(dl.queue, pk.id, nfAccept), nfqType(nfqMsgVerdict))
			}
		}
	}
}

// release accepts each packet of fifo once it is due, those due together
// in one write, until read closes fifo. Once ctx ends it waits no more
// and only drains fifo: run then lets everything go at once.
func (dl *delayer) release(ctx context.Context, fifo <-chan held) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var batch [][]byte
	var next held // taken from fifo and not yet let go, if have
	var have bool
	for {
		if !have {
			p, ok := <-fifo
			if !ok {
				return
			}
			next, have = p, true
		}
		if ctx.Err() != nil {
			have = false
			continue
		}
		if wait := time.Until(next.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				continue
			}
		}
		if time.Since(next.due) > delayLate {
			dl.stats.late.Add(1)
		}
		batch = append(batch[:0], nfqVerdict(dl.queue, next.id, nfAccept))
		have = false
	more:
		for len(batch) < 64 {
			select {
			case p, ok := <-fifo:
				if !ok {
					break more
				}
				if time.Until(p.due) > 0 {
					next, have = p, true // later ones are later still
					break more
				}
				batch = append(batch, nfqVerdict(dl.queue, p.id, nfAccept))
			default:
				break more
			}
		}
		if _, err := dl.verdicts(batch[0], nfqType(nfqMsgVerdict), batch[1:]...); err != nil && ctx.Err() == nil {
			dl.logger.Warn("lab delay verdict", "err", err)
		}
	}
}

// verdicts sends verdict messages of type typ, all in one write.
func (dl *delayer) verdicts(first []byte, typ uint16, more ...[]byte) ([]netlink.Message, error) {
	msgs := make([]netlink.Message, 0, 1+len(more))
	for _, data := range append([][]byte{first}, more...) {
		msgs = append(msgs, netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request},
			Data:   data,
		})
	}
	return dl.conn.SendMessages(msgs)
}

// watch ends the delay when its chain is gone from the namespace: `prober
// lab clear` or another fault's Clear in another process, or `lab down`.
func (dl *delayer) watch(ctx context.Context) {
	tick := time.NewTicker(delayPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ok, err := chainPresent(dl.ns, dl.chain)
		if err != nil || !ok {
			dl.logger.Info("lab delay chain gone", "chain", dl.chain, "err", err)
			dl.stop()
			return
		}
	}
}

// chainPresent reports whether table inet prober_fault in ns has chain.
func chainPresent(ns, chain string) (bool, error) {
	var found bool
	err := nftIn(ns, func(c *nftables.Conn) error {
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
		if err != nil {
			return fmt.Errorf("nftables: list chains: %w", err)
		}
		found = slices.ContainsFunc(chains, func(ch *nftables.Chain) bool {
			return ch.Table.Name == faultTable && ch.Name == chain
		})
		return nil
	})
	return found, err
}

// forget removes dl from hs.
func (hs *holdSet) forget(dl *delayer) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.list = slices.DeleteFunc(hs.list, func(o *delayer) bool { return o == dl })
}

// running returns the delays hs holds.
func (hs *holdSet) running() []*delayer {
	if hs == nil {
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return slices.Clone(hs.list)
}

// stopDelays stops every delay f holds in this process and waits for
// them: each lets its packets go and closes its socket, so the kernel
// holds nothing when the tables go (deleting a chain drops what a queue
// holds).
func (f *Fabric) stopDelays() {
	ds := f.holds.running()
	for _, dl := range ds {
		dl.stop()
	}
	for _, dl := range ds {
		<-dl.done
	}
}

// Hold blocks while this process holds delay faults in the lab: until
// each has ended, by Clear or Down or because its chain is gone (`prober
// lab clear` in another process), or until ctx ends, which stops them
// and removes their rules. It returns at once when there are none.
func (f *Fabric) Hold(ctx context.Context) error {
	ds := f.holds.running()
	for _, dl := range ds {
		select {
		case <-dl.done:
			continue
		case <-ctx.Done():
		}
		var errs []error
		for _, dl := range ds {
			dl.stop()
			<-dl.done
			errs = append(errs, deleteChain(dl.ns, dl.chain))
		}
		return errors.Join(errs...)
	}
	return nil
}

// deleteChain deletes chain from table inet prober_fault in ns, if both
// are still there.
func deleteChain(ns, chain string) error {
	ok, err := chainPresent(ns, chain)
	if err != nil || !ok {
		return err
	}
	return nftIn(ns, func(c *nftables.Conn) error {
		c.DelChain(&nftables.Chain{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: faultTable}, Name: chain})
		return nil
	})
}

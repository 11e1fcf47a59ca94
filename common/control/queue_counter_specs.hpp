// The per-queue counters by name: the names under "counters" in the control socket's `stats`
// reply (protocol.hpp), and the help texts unetback-ctl gives them as Prometheus metrics. The
// daemon's queues keep one counter of each (backend/vif/queue_counters.hpp).
#pragma once

#include <string_view>

// X(name, help): every per-queue counter, in the order stats report them. The help text is
// what unetback-ctl's Prometheus output says of the counter (# HELP).
#define UNETBACK_QUEUE_COUNTERS(X)                                                               \
  X(rx_packets, "host->guest packets delivered")                                                 \
  X(rx_bytes, "host->guest bytes delivered")                                                     \
  X(rx_slots, "ring slots used (data + extras)")                                                 \
  X(rx_min_slots, "ceil((xdp-headroom + len)/4096) + extras: the minimum for those packets")     \
  X(rx_extras, "extras written (GSO, HASH)")                                                     \
  X(rx_hash_extras, "HASH extras written (the frontend set an algorithm and flags)")             \
  X(rx_hashed, "TAP frames Toeplitz-hashed (ctrl ring: algorithm and flags)")                    \
  X(rx_steered_out, "hashed frames handed to the queue the mapping names")                       \
  X(rx_steered_in, "frames another queue handed this one by the mapping")                        \
  X(rx_steer_dropped, "mapping's queue full, or no steering buffer free")                        \
  X(rx_dropped_queue_full, "over the per-queue byte cap")                                        \
  X(rx_dropped_expired, "waited longer than rx-drain-timeout-ms")                                \
  X(rx_dropped_too_big, "more than one slot for a frontend without feature-sg")                  \
  X(rx_dropped_offload, "a GSO/checksum layout the frontend cannot take")                        \
  X(rx_copy_errors, "grant-copy segments that failed (slot answered error)")                     \
  X(rx_copy_segments, "host->guest grant-copy segments")                                         \
  X(rx_copy_calls, "host->guest grant-copy calls (a gntdev ioctl each under Xen)")               \
  X(rx_copy_ops,                                                                                 \
    "host->guest GNTTABOP_copy ops gntdev makes (one per local page a segment touches)")         \
  X(rx_copy_hypercalls, "host->guest GNTTABOP_copy hypercalls (16 ops each at most)")            \
  X(rx_notify_sent, "host->guest event-channel notifications sent")                              \
  X(rx_notify_suppressed,                                                                        \
    "host->guest notifications left out: the frontend did not ask (rsp_event)")                  \
  X(rx_stalls, "carrier went off: no slots for the head packet too long")                        \
  X(rx_waits_for_slots, "RX passes that stopped: the head packet found too few posted buffers")  \
  X(rx_polls, "RX ring polls on the timer: no feature-rx-notify, so refills are not kicked")     \
  X(rx_poll_packets, "host->guest packets delivered by those polls")                             \
  X(rx_housekeeping_packets, "host->guest packets delivered by the 100 ms housekeeping look")    \
  X(rx_switch_packets, "packets queued by the internal switch (VM->VM, uplink)")                 \
  X(rx_over_18_slots, "> 18 data slots: Linux netfront drops such a packet")                     \
  X(rx_dropped_source_gone, "VM->VM zerocopy packets whose sender disconnected")                 \
  X(tx_packets, "guest->host packets delivered")                                                 \
  X(tx_bytes, "guest->host bytes delivered")                                                     \
  X(tx_slots, "guest->host ring slots consumed")                                                 \
  X(tx_drop_too_many_slots, "guest->host packets dropped: more slots than the frontend may use") \
  X(tx_drop_frag_size, "guest->host packets dropped: fragment sizes do not add up")              \
  X(tx_drop_runt, "guest->host packets dropped: first slot shorter than an Ethernet header")     \
  X(tx_drop_bad_gso, "guest->host packets dropped: a bad GSO extra")                             \
  X(tx_drop_offload, "headers the checksum/GSO mapping refused")                                 \
  X(tx_drop_copy_error, "a grant copy or map of the packet failed")                              \
  X(tx_drop_sink, "the TAP refused the frame")                                                   \
  X(tx_zero_size_slots, "XSA-448: answered OKAY and skipped")                                    \
  X(tx_mcast_requests, "multicast add/remove extras from the frontend")                          \
  X(tx_mcast_refused, "MCAST_ADD past the filter's 64 entries: answered ERROR")                  \
  X(rx_dropped_mcast_filter, "guest-RX multicast of a group the guest did not add")              \
  X(tx_zerocopy, "packets sent from mapped guest pages")                                         \
  X(tx_copied, "packets grant-copied into backend memory")                                       \
  X(tx_copy_for_size, "PendingLimiter: below goodcopy-len")                                      \
  X(tx_copy_for_limit, "PendingLimiter: too many zerocopy packets in flight")                    \
  X(tx_copy_for_errors, "PendingLimiter: too many zerocopy errors")                              \
  X(tx_copy_for_cost, "tx-map auto: copied because copying measured cheaper here")               \
  X(tx_map_failures, "guest->host grant maps that failed")                                       \
  X(tx_copy_segments, "guest->host grant-copy segments")                                         \
  X(tx_copy_calls, "guest->host grant-copy calls (a gntdev ioctl each under Xen)")               \
  X(tx_copy_ops,                                                                                 \
    "guest->host GNTTABOP_copy ops gntdev makes (one per local page a segment touches)")         \
  X(tx_copy_hypercalls, "guest->host GNTTABOP_copy hypercalls (16 ops each at most)")            \
  X(tx_rate_limited, "passes stopped by the `rate` credit")                                      \
  X(tx_notify_sent, "guest->host event-channel notifications sent")                              \
  X(tx_notify_suppressed,                                                                        \
    "guest->host notifications left out: the frontend did not ask (rsp_event)")                  \
  X(tx_fatal, "protocol violations: the vif was disabled")                                       \
  X(tx_switched, "packets handed to other vifs by the internal switch")                          \
  X(tx_switch_flooded, "broadcast/multicast/unknown destination: to every port")                 \
  X(tx_switch_uplink, "packets written to the switch's uplink TAP")                              \
  X(tx_switch_dropped, "no port to send to (destination behind the sender itself)")              \
  X(tx_switch_full, "receiver's RX queue full: dropped before any copy, OKAY")                   \
  X(tx_switch_heap, "copied packets on the heap: every switch buffer in use")                    \
  X(tx_dropped_spoofed, "switch: source MAC not the vif's B:mac (answered OKAY)")                \
  X(tx_stalls, "zerocopy-fallback=0: passes stopped at the pending limit")                       \
  X(events, "event-channel wakeups")                                                             \
  X(spurious_events, "wakeups that found no work")                                               \
  X(housekeeping_passes,                                                                         \
    "100 ms housekeeping passes: while packets wait, and for 2 s after the last work")

namespace unetback::control {

/// One counter's name (as the control socket's stats name it) and its help text.
struct QueueCounterSpec {
  std::string_view name;
  std::string_view help;
};

/// Every counter, in the order stats report them.
inline constexpr QueueCounterSpec kQueueCounterSpecs[] = {
#define UNETBACK_SPEC(name, help) {#name, help},
    UNETBACK_QUEUE_COUNTERS(UNETBACK_SPEC)
#undef UNETBACK_SPEC
};

}  // namespace unetback::control

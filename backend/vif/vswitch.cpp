#include "backend/vif/vswitch.hpp"

#include <algorithm>
#include <cstring>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/net/frame.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::vif {
namespace {

net::MacAddress mac_at(std::span<const std::byte> head, std::size_t off) {
  net::MacAddress m;
  for (std::size_t i = 0; i < 6; ++i) m.octets[i] = static_cast<std::uint8_t>(head[off + i]);
  return m;
}

}  // namespace

VSwitch::VSwitch(std::string name) : name_(std::move(name)) {}

VSwitch::~VSwitch() {
  if (uplink_thread_.joinable()) {
    const std::uint64_t one = 1;
    (void)!::write(stop_fd_.get(), &one, sizeof one);
    uplink_thread_.join();
  }
}

std::error_code VSwitch::attach_uplink(const std::string& tap_name) {
  if (uplink_) return std::make_error_code(std::errc::device_or_resource_busy);
  net::TapConfig cfg;
  cfg.name = tap_name;
  cfg.vnet_hdr = true;
  cfg.non_blocking = true;
  cfg.offloads = {};  // plain frames from the host (its stack segments and checksums them)
  auto tap = net::TapDevice::create(cfg);
  if (!tap) return tap.error();
  const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return last_errno();
  stop_fd_.reset(efd);
  uplink_.emplace(std::move(*tap));
  uplink_thread_ = std::thread([this] { uplink_loop(); });
  log::write(log::Level::info, "switch " + name_, "uplink TAP " + tap_name);
  return {};
}

SwitchPortId VSwitch::add_port(std::shared_ptr<const SwitchPort> port) {
  const std::lock_guard lock(mu_);
  const SwitchPortId id = next_id_++;
  ports_.emplace(id, std::move(port));
  return id;
}

void VSwitch::remove_port(SwitchPortId id) {
  const std::lock_guard lock(mu_);
  ports_.erase(id);
  rx_filters_.erase(id);
  macs_.forget_port(id);
}

void VSwitch::set_rx_filter(SwitchPortId id, std::shared_ptr<const McastFilter> filter) {
  const std::lock_guard lock(mu_);
  if (filter == nullptr || !ports_.contains(id)) {
    rx_filters_.erase(id);
  } else {
    rx_filters_[id] = std::move(filter);
  }
}

void VSwitch::Route::count_filtered(std::uint32_t hash) const {
  for (const auto& port : filtered)
    if (!port->queues.empty()) port->queues[hash % port->queues.size()]->count_mcast_filtered();
}

void VSwitch::route(SwitchPortId from, const net::MacAddress& src, const net::MacAddress& dst,
                    Clock::time_point now, Route& out) {
  const std::lock_guard lock(mu_);
  ++stats_.route_locks;
  route_locked(from, src, dst, now, out);
}

void VSwitch::route_pass(SwitchPortId from, std::span<const RouteQuery> queries,
                         Clock::time_point now, std::span<Route> out) {
  const std::lock_guard lock(mu_);
  ++stats_.route_locks;
  for (std::size_t i = 0; i < queries.size() && i < out.size(); ++i) {
    if (queries[i].skip) {
      out[i].clear();
    } else {
      route_locked(from, queries[i].src, queries[i].dst, now, out[i]);
    }
  }
}

void VSwitch::route_locked(SwitchPortId from, const net::MacAddress& src,
                           const net::MacAddress& dst, Clock::time_point now, Route& out) {
  out.clear();
  ++stats_.routed;
  if (!macs_.learn(src, from, now)) ++stats_.not_learnt;
  if (!dst.is_multicast()) {
    if (const auto to = macs_.lookup(dst, now)) {
      if (*to == from) {
        ++stats_.dropped_same_port;
        return;
      }
      if (*to == kUplinkPort) {
        out.uplink = uplink_.has_value();
      } else if (const auto it = ports_.find(*to); it != ports_.end()) {
        out.guests.push_back(it->second);
      }
      if (out.uplink || !out.guests.empty()) {
        ++stats_.forwarded;
        return;
      }
    }
  }
  // Broadcast, multicast, or nobody known by that MAC (yet): everyone else, but a multicast
  // group only to the vifs whose filter takes it (McastFilter::accepts, the TAP path's rule).
  out.flooded = true;
  ++stats_.flooded;
  const bool group = dst.is_multicast();
  for (const auto& [id, port] : ports_) {
    if (id == from) continue;
    const auto filter = group ? rx_filters_.find(id) : rx_filters_.end();
    if (filter != rx_filters_.end() &&
        !filter->second->accepts(std::as_bytes(std::span(dst.octets)))) {
      out.filtered.push_back(port);
    } else {
      out.guests.push_back(port);
    }
  }
  out.uplink = from != kUplinkPort && uplink_.has_value();
}

bool VSwitch::send_uplink(const net::VirtioNetHdr& hdr, std::span<const iovec> frame) {
  if (!uplink_) return false;
  std::array<iovec, kMaxRxFrags + 2> iov{};
  if (frame.size() + 1 > iov.size()) return false;
  iov[0] = iovec{const_cast<net::VirtioNetHdr*>(&hdr), net::kVnetHdrLen};
  std::copy(frame.begin(), frame.end(), iov.begin() + 1);
  const bool ok = ::writev(uplink_->fd(), iov.data(), static_cast<int>(frame.size() + 1)) >= 0;
  const std::lock_guard lock(mu_);
  ++(ok ? stats_.uplink_tx : stats_.uplink_errors);
  return ok;
}

VSwitch::Stats VSwitch::stats() const {
  const std::lock_guard lock(mu_);
  return stats_;
}

std::size_t VSwitch::ports() const {
  const std::lock_guard lock(mu_);
  return ports_.size();
}

void VSwitch::uplink_loop() {
  // A frame of the largest size the TAP can hand us (no GSO: offloads are off).
  std::vector<std::byte> buf(net::kVnetHdrLen + 65536);
  for (;;) {
    pollfd fds[2] = {{uplink_->fd(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = ::read(uplink_->fd(), buf.data(), buf.size());
      if (n <= static_cast<ssize_t>(net::kVnetHdrLen + net::kEthHeaderLen)) break;
      const auto vh = net::load_vnet_hdr(std::span(buf.data(), net::kVnetHdrLen));
      uplink_frame(
          std::span(buf.data() + net::kVnetHdrLen, static_cast<std::size_t>(n) - net::kVnetHdrLen),
          *vh);
    }
  }
}

void VSwitch::uplink_frame(std::span<std::byte> frame, const net::VirtioNetHdr& vh) {
  {
    const std::lock_guard lock(mu_);
    ++stats_.uplink_rx;
  }
  route(kUplinkPort, mac_at(frame, 6), mac_at(frame, 0), Clock::now(), uplink_route_);
  if (uplink_route_.guests.empty() && uplink_route_.filtered.empty()) return;
  const std::uint32_t hash = flow_hash(frame);
  uplink_route_.count_filtered(hash);
  const auto len = static_cast<std::uint32_t>(frame.size());
  // One copy in backend memory shared by every receiver (none for receivers whose RX queue
  // is full); each receiver's release drops its reference.
  int buf = -1;
  std::shared_ptr<std::byte[]> heap;  // every pool buffer still read: the heap, as before
  std::byte* bytes = nullptr;
  for (const auto& port : uplink_route_.guests) {
    if (port->queues.empty()) continue;
    QueueLink& link = *port->queues[hash % port->queues.size()];
    if (link.full(len)) continue;
    auto off = net::map_tap_rx(vh, port->offloads, frame, frame.size());
    if (!off) continue;
    if (bytes == nullptr) {
      buf = uplink_buffers_->take();
      if (buf >= 0 && frame.size() <= PacketPool::kMaxFrame) {
        bytes = uplink_buffers_->data(buf);
      } else {
        heap.reset(new std::byte[frame.size()]);
        bytes = heap.get();
      }
      std::memcpy(bytes, frame.data(), frame.size());
    }
    RxPacket p;
    p.frags[0] = RxFrag{hv::GrantCopyPtr::local(bytes), len};
    p.nr_frags = 1;
    p.len = len;
    p.offload = *off;
    p.release = heap ? RxRelease::holding(heap) : uplink_buffers_->share(uplink_buffers_, buf);
    (void)link.deliver(std::move(p));
  }
  if (buf >= 0) uplink_buffers_->unref(buf);
}

}  // namespace unetback::vif

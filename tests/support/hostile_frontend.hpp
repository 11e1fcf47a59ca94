// HostileFrontend: a guest that does whatever a malicious domU can do to a vif backend, for the
// hostile suite (issue 9, docs/security.md). It is its own xensim domain (a frontend-role
// SimHypervisor in the test process) and nothing in it follows the netif protocol by itself:
//
// * xenstore: any key, any value, any state, in any order, in its own frontend directory;
// * rings: it grants the two ring pages and then writes raw requests and raw indices into
//   them (FrontRing for the well-formed steps, the shared header for everything else);
// * grants: data pages granted read-write or read-only, revoked politely (the SharedPages go,
//   deferred while the backend holds them) or, through dom0's fault injection, under the
//   backend's feet (inject_revoke_grant / inject_corrupt_grant);
// * events: one notification or a storm of them;
// * vanish(): the domain dies at once (its broker connection closes), whatever the backend
//   is doing with its pages and ports.
//
// Single-threaded, except that the raw ring accessors may be used from a second thread to
// race the backend (that is the point of XSA-155 scenarios).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/ring/shared_ring.hpp"
#include "common/util/strong_id.hpp"
#include "common/wire/netif.hpp"
#include "common/xenbus/xenbus_state.hpp"

namespace unetback::test {

using TxFrontRing = ring::FrontRing<wire::TxRequest, wire::TxResponse>;
using RxFrontRing = ring::FrontRing<wire::RxRequest, wire::RxResponse>;

class HostileFrontend {
 public:
  /// Registers a fresh domain `name` in the xensim world at `world_dir`. `injector` (dom0)
  /// lends its fault injection for revokes and corruptions under the backend's feet.
  HostileFrontend(const std::string& world_dir, std::string name,
                  hv::SimHypervisor* injector = nullptr);
  ~HostileFrontend();
  HostileFrontend(const HostileFrontend&) = delete;
  HostileFrontend& operator=(const HostileFrontend&) = delete;

  [[nodiscard]] DomId dom() const { return dom_; }
  [[nodiscard]] bool alive() const { return hv_ != nullptr; }
  /// Our frontend directory and the backend's, once the toolstack made device `devid`.
  void attach(DevId devid = DevId{0}, DomId backend = kDom0);
  [[nodiscard]] const std::string& fe_dir() const { return fe_dir_; }
  [[nodiscard]] const std::string& be_dir() const { return be_dir_; }

  // --- xenstore (keys relative to our frontend directory) ---
  std::error_code write(std::string_view key, std::string_view value);
  std::error_code remove(std::string_view key);
  /// Writes `state` as the frontend's state: any text, valid or not.
  std::error_code set_state(std::string_view state) { return write("state", state); }
  std::error_code set_state(xenbus::XenbusState state) {
    return set_state(xenbus::to_xs_string(state));
  }
  [[nodiscard]] std::optional<std::string> read_backend(std::string_view key);
  /// Waits (bounded, by polling) until the backend's state reads `state`.
  std::error_code wait_backend_state(std::string_view state, std::chrono::milliseconds timeout);
  std::error_code wait_backend_state(xenbus::XenbusState state, std::chrono::milliseconds timeout) {
    return wait_backend_state(xenbus::to_xs_string(state), timeout);
  }

  // --- rings and the event channel ---
  /// Grants the TX and RX ring pages read-write to the backend, initialises both rings at
  /// `start` (wrap-around tests start near 2^32) and allocates an unbound port for it.
  std::error_code make_rings(RingIdx start = RingIdx{0});
  [[nodiscard]] GrantRef tx_ring_ref() const;
  [[nodiscard]] GrantRef rx_ring_ref() const;
  [[nodiscard]] Port port() const { return port_; }
  /// Another unbound port of ours, for `remote` (which may not be the backend at all).
  Result<Port> alloc_port(DomId remote);
  /// What a well-behaved netfront writes (rings, event channel, request-rx-copy,
  /// feature-rx-notify), then `overrides` (an empty value removes the key), then, if
  /// `state` is set, that state.
  std::error_code publish(const std::map<std::string, std::string>& overrides = {},
                          std::optional<std::string_view> state = "4");

  // --- raw TX ring ---
  [[nodiscard]] TxFrontRing& tx() { return *tx_; }
  [[nodiscard]] RxFrontRing& rx() { return *rx_; }
  [[nodiscard]] ring::SharedRingHeader& tx_header() const;
  [[nodiscard]] ring::SharedRingHeader& rx_header() const;
  /// The request slot `i` (mod ring size) of the TX page, to write behind the backend's back.
  [[nodiscard]] std::byte* tx_slot(std::uint32_t i) const;
  /// Publishes the private requests and notifies (always: a hostile guest ignores req_event).
  void push_tx();
  /// Writes req_prod directly, whatever the ring holds.
  void set_tx_req_prod(std::uint32_t v);
  /// Takes every TX response the backend published (at most a ring's worth).
  std::vector<wire::TxResponse> take_tx_responses();
  /// Waits until `n` TX responses have been collected into `out` (bounded).
  bool wait_tx_responses(std::vector<wire::TxResponse>& out, std::size_t n,
                         std::chrono::milliseconds timeout);

  // --- RX ---
  /// Grants `n` fresh pages with `access` and posts them as RX requests (ids from 0), then
  /// pushes and notifies.
  std::error_code post_rx(std::size_t n, hv::Access access = hv::Access::read_write);
  std::vector<wire::RxResponse> take_rx_responses();

  // --- data pages ---
  struct Page {
    GrantRef ref;
    std::byte* data;
  };
  /// One zeroed page granted to the backend.
  Result<Page> grant_page(hv::Access access = hv::Access::read_write);
  /// Ends our grant of `ref` the polite way (deferred while the backend holds it).
  void revoke(GrantRef ref);
  /// Clears `ref` from outside, while the backend may hold it (dom0 fault injection).
  std::error_code revoke_under_backend(GrantRef ref);
  /// Rewrites `ref` to name another domain and frame (dom0 fault injection).
  std::error_code corrupt_grant(GrantRef ref, DomId domid, std::uint32_t frame);
  /// Our grants the backend has mapped or is copying right now (GTF_reading/GTF_writing).
  [[nodiscard]] std::size_t grants_in_use() const;

  // --- events ---
  /// Notifies the backend `times` times, as fast as it can.
  void notify(std::size_t times = 1);
  /// The same on another of our ports (alloc_port), e.g. a control ring's.
  void notify_port(Port port, std::size_t times = 1);
  /// The domain dies now: ports closed, memory gone, @releaseDomain fires.
  void vanish();

 private:
  std::unique_ptr<hv::SimHypervisor> hv_;
  hv::SimHypervisor* injector_;
  DomId dom_{};
  std::unique_ptr<hv::XenStore> xs_;
  std::unique_ptr<hv::EventChannel> evtchn_;
  Port port_{};
  std::string fe_dir_, be_dir_;
  std::map<std::uint32_t, hv::SharedPages> pages_;  // by grant ref
  hv::SharedPages tx_page_, rx_page_;
  std::optional<TxFrontRing> tx_;
  std::optional<RxFrontRing> rx_;
  std::uint16_t next_rx_id_ = 0;
};

}  // namespace unetback::test

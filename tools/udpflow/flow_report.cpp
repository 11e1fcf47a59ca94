#include "tools/udpflow/flow_report.hpp"

#include <cstdio>

namespace unetback::udpflow {

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

double rate(std::uint64_t packets, double seconds) {
  return seconds > 0 ? static_cast<double>(packets) / seconds : 0.0;
}

std::string format_send(const SendReport& r, bool json) {
  const std::string pps = fixed(rate(r.packets, r.seconds), 1);
  const std::string secs = fixed(r.seconds, 3);
  if (json) {
    return "{\"packets\":" + std::to_string(r.packets) + ",\"pps\":" + pps +
           ",\"bytes\":" + std::to_string(r.bytes) + ",\"seconds\":" + secs +
           ",\"errors\":" + std::to_string(r.errors) + ",\"eagain\":" + std::to_string(r.eagain) +
           ",\"enobufs\":" + std::to_string(r.enobufs) + "}";
  }
  return "sent=" + std::to_string(r.packets) + " pps=" + pps + " bytes=" + std::to_string(r.bytes) +
         " errors=" + std::to_string(r.errors) + " eagain=" + std::to_string(r.eagain) +
         " enobufs=" + std::to_string(r.enobufs) + " seconds=" + secs;
}

std::string format_recv(const RecvReport& r, bool json) {
  const std::string pps = fixed(rate(r.packets, r.seconds), 1);
  const std::string secs = fixed(r.seconds, 3);
  if (json) {
    std::string s = "{\"packets\":" + std::to_string(r.packets) + ",\"pps\":" + pps +
                    ",\"bytes\":" + std::to_string(r.bytes) + ",\"seconds\":" + secs;
    if (r.lost) s += ",\"lost\":" + std::to_string(*r.lost);
    s += ",\"duplicates\":" + std::to_string(r.duplicates) +
         ",\"reordered\":" + std::to_string(r.reordered) +
         ",\"socket_drops\":" + std::to_string(r.socket_drops) + "}";
    return s;
  }
  std::string s =
      "received=" + std::to_string(r.packets) + " pps=" + pps + " bytes=" + std::to_string(r.bytes);
  if (r.lost) s += " lost=" + std::to_string(*r.lost);
  s += " seconds=" + secs + " duplicates=" + std::to_string(r.duplicates) +
       " reordered=" + std::to_string(r.reordered) +
       " socket_drops=" + std::to_string(r.socket_drops);
  return s;
}

}  // namespace unetback::udpflow

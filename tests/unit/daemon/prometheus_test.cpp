// unetback-ctl's Prometheus output and its HTTP answers, from canned daemon replies. The
// exposition text is parsed back here with the format's own rules (HELP/TYPE before a
// family's samples, name{label="value",...} value), so a malformed line fails the test.
#include "tools/ctl/prometheus.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "common/control/queue_counter_specs.hpp"
#include "tools/ctl/metrics_server.hpp"

namespace unetback::ctl {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

struct Exposition {
  std::map<std::string, std::string> help, type;
  std::vector<Sample> samples;
};

bool metric_name(std::string_view n) {
  if (n.empty() || (n[0] >= '0' && n[0] <= '9')) return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == ':'))
      return false;
  }
  return true;
}

// Parses the text format (version 0.0.4); ADD_FAILUREs on anything out of place.
Exposition parse_exposition(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  std::string family;  // the family whose TYPE came last
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const auto sp = rest.find(' ');
      EXPECT_NE(sp, std::string::npos) << line;
      const std::string name = rest.substr(0, sp);
      EXPECT_TRUE(metric_name(name)) << line;
      auto& table = line[2] == 'H' ? e.help : e.type;
      EXPECT_EQ(table.count(name), 0U) << "a second " << line;
      table[name] = rest.substr(sp + 1);
      if (line[2] == 'T') {
        EXPECT_TRUE(e.help.count(name)) << "TYPE before HELP: " << line;
        family = name;
      }
      continue;
    }
    EXPECT_NE(line[0], '#') << line;
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    EXPECT_TRUE(metric_name(s.name)) << line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const auto eq = line.find('=', i);
        EXPECT_NE(eq, std::string::npos) << line;
        if (eq == std::string::npos) return e;
        const std::string key = line.substr(i, eq - i);
        EXPECT_TRUE(metric_name(key)) << line;
        EXPECT_EQ(line[eq + 1], '"') << line;
        std::string value;
        std::size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        EXPECT_LT(j, line.size()) << "unterminated label value: " << line;
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    EXPECT_EQ(i < line.size() ? line[i] : '\0', ' ') << line;
    s.value = line.substr(i + 1);
    EXPECT_FALSE(s.value.empty()) << line;
    EXPECT_EQ(s.name, family) << "a sample outside its family's HELP/TYPE block: " << line;
    e.samples.push_back(s);
  }
  return e;
}

JsonValue doc(std::string_view text) {
  std::string error;
  auto d = parse_json(text, &error);
  EXPECT_TRUE(d) << error;
  return d ? *d : JsonValue();
}

constexpr std::string_view kTwoVifs = R"({"mapped_grant_pages":12,"vifs":[
  {"vif":"5/0","domid":5,"devid":0,"state":"Connected","state_id":4,"frontend_state":"Connected",
   "tap":"vif5.0","connected":true,"carrier":true,"queues":[
     {"queue":0,"counters":{"rx_packets":18446744073709551615,"tx_packets":7}},
     {"queue":1,"counters":{"rx_packets":3,"tx_packets":4,"future_counter":9}}]},
  {"vif":"7/1","domid":7,"devid":1,"state":"InitWait","state_id":2,"frontend_state":null,
   "tap":"vif7.1","connected":false,"carrier":false,"queues":[]}]})";

TEST(Prometheus, EveryQueueCounterIsAFamilyWithHelpTypeAndLabelledSamples) {
  const std::string text = format_prometheus(doc(kTwoVifs));
  const Exposition e = parse_exposition(text);
  for (const auto& spec : control::kQueueCounterSpecs) {
    const std::string name = "unetback_" + std::string(spec.name) + "_total";
    EXPECT_EQ(e.type.count(name) ? e.type.at(name) : "", "counter") << name;
    EXPECT_EQ(e.help.count(name) ? e.help.at(name) : "", std::string(spec.help)) << name;
  }
  std::map<std::string, std::string> rx;  // queue -> value, for vif5.0
  for (const auto& s : e.samples) {
    if (s.name != "unetback_rx_packets_total") continue;
    EXPECT_EQ(s.labels.size(), 4U);
    EXPECT_EQ(s.labels.at("vif"), "vif5.0");
    EXPECT_EQ(s.labels.at("domid"), "5");
    EXPECT_EQ(s.labels.at("devid"), "0");
    rx[s.labels.at("queue")] = s.value;
  }
  // 64-bit counters keep every digit.
  EXPECT_EQ(rx, (std::map<std::string, std::string>{{"0", "18446744073709551615"}, {"1", "3"}}));
  EXPECT_NE(text.find("unetback_tx_packets_total{vif=\"vif5.0\",domid=\"5\",devid=\"0\","
                      "queue=\"1\"} 4\n"),
            std::string::npos)
      << text;
}

TEST(Prometheus, VifGaugesCoverVifsWithoutQueuesAndTheGrantGauge) {
  const Exposition e = parse_exposition(format_prometheus(doc(kTwoVifs)));
  std::map<std::string, std::string> seen;  // "family vif" -> value
  for (const auto& s : e.samples)
    seen[s.name + " " + (s.labels.count("vif") ? s.labels.at("vif") : "-")] = s.value;
  EXPECT_EQ(seen["unetback_mapped_grant_pages -"], "12");
  EXPECT_EQ(seen["unetback_vif_connected vif5.0"], "1");
  EXPECT_EQ(seen["unetback_vif_connected vif7.1"], "0");
  EXPECT_EQ(seen["unetback_vif_carrier vif7.1"], "0");
  EXPECT_EQ(seen["unetback_vif_backend_state vif5.0"], "4");
  EXPECT_EQ(seen["unetback_vif_backend_state vif7.1"], "2");
  EXPECT_EQ(seen["unetback_vif_queues vif5.0"], "2");
  EXPECT_EQ(seen["unetback_vif_queues vif7.1"], "0");
  for (const auto& name :
       {"unetback_vif_connected", "unetback_vif_carrier", "unetback_vif_backend_state",
        "unetback_vif_queues", "unetback_mapped_grant_pages"})
    EXPECT_EQ(e.type.count(name) ? e.type.at(name) : "", "gauge") << name;
}

TEST(Prometheus, ACounterOfANewerDaemonIsKeptAndAMalformedNameIsLeftOut) {
  const std::string text = format_prometheus(doc(R"({"vifs":[{"domid":1,"devid":0,"queues":[
      {"queue":0,"counters":{"future_counter":9,"bad name\"}":1,"tx_bytes":"not a number"}}]}]})"));
  const Exposition e = parse_exposition(text);
  EXPECT_EQ(e.type.count("unetback_future_counter_total")
                ? e.type.at("unetback_future_counter_total")
                : "",
            "counter");
  std::set<std::string> names;
  for (const auto& s : e.samples) names.insert(s.name);
  EXPECT_TRUE(names.count("unetback_future_counter_total"));
  EXPECT_FALSE(names.count("unetback_tx_bytes_total")) << "a string is no sample value";
  EXPECT_EQ(text.find("bad name"), std::string::npos) << text;
}

TEST(Prometheus, NoVifsStillGivesEveryFamilyAndNoSample) {
  const Exposition e = parse_exposition(format_prometheus(doc(R"({"vifs":[]})")));
  EXPECT_TRUE(e.samples.empty());
  EXPECT_EQ(e.type.size(), std::size(control::kQueueCounterSpecs) + 5);
}

TEST(Prometheus, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_label_value("vif5.0"), "vif5.0");
}

MetricsSource fixed(bool ok, std::string text, int* calls) {
  return [=] {
    ++*calls;
    return MetricsFetch{ok, text};
  };
}

TEST(MetricsHttp, GetMetricsAnswersTheExpositionWithItsContentType) {
  int calls = 0;
  const auto r = answer(parse_request_line("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
                        fixed(true, "# HELP a b\n", &calls));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, kPrometheusContentType);
  EXPECT_EQ(r.body, "# HELP a b\n");
  EXPECT_EQ(calls, 1);
  const std::string wire = serialize(r);
  EXPECT_EQ(wire.rfind("HTTP/1.1 200 OK\r\n", 0), 0U) << wire;
  EXPECT_NE(wire.find("\r\nContent-Length: 11\r\n"), std::string::npos) << wire;
  EXPECT_NE(wire.find("\r\nConnection: close\r\n\r\n# HELP a b\n"), std::string::npos) << wire;
  // A query string (Prometheus' params) is the same path.
  EXPECT_EQ(
      answer(parse_request_line("GET /metrics?x=1 HTTP/1.0\n\n"), fixed(true, "", &calls)).status,
      200);
}

TEST(MetricsHttp, OtherPathsMethodsAndGarbageDoNotAskTheDaemon) {
  int calls = 0;
  const auto src = fixed(true, "x", &calls);
  EXPECT_EQ(answer(parse_request_line("GET / HTTP/1.1\r\n\r\n"), src).status, 404);
  EXPECT_EQ(answer(parse_request_line("GET /metricsx HTTP/1.1\r\n\r\n"), src).status, 404);
  EXPECT_EQ(answer(parse_request_line("POST /metrics HTTP/1.1\r\n\r\n"), src).status, 405);
  EXPECT_NE(serialize(answer(parse_request_line("PUT /metrics HTTP/1.1\r\n\r\n"), src))
                .find("\r\nAllow: GET\r\n"),
            std::string::npos);
  for (std::string_view bad : {"", "\r\n\r\n", "GET\r\n\r\n", "GET /metrics\r\n\r\n",
                               "GET  HTTP/1.1\r\n\r\n", "get /metrics HTTP/1.1\r\n\r\n",
                               "GET /metrics FTP/1.0\r\n\r\n", "\x16\x03\x01\x02\x00\x01"})
    EXPECT_EQ(answer(parse_request_line(bad), src).status, 400) << bad;
  EXPECT_EQ(calls, 0);
}

TEST(MetricsHttp, AnUnreachableDaemonIs503WithTheReason) {
  int calls = 0;
  const auto r = answer(parse_request_line("GET /metrics HTTP/1.1\r\n\r\n"),
                        fixed(false, "cannot connect to /run/x.sock: No such file", &calls));
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("No such file"), std::string::npos);
  EXPECT_EQ(serialize(r).rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0U);
}

TEST(MetricsHttp, ListenRefusesAddressesWithoutAPortOrNotNumeric) {
  for (std::string_view bad : {"127.0.0.1", "localhost:9469", "127.0.0.1:", "127.0.0.1:99999",
                               ":9469", "1.2.3.4.5:1", "127.0.0.1:-1"})
    EXPECT_FALSE(MetricsServer::listen(bad)) << bad;
  auto s = MetricsServer::listen("127.0.0.1:0");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->address().rfind("127.0.0.1:", 0), 0U);
  EXPECT_NE(s->address(), "127.0.0.1:0") << "the bound port is reported";
}

TEST(MetricsHttp, TheDaemonIsAskedOncePerIntervalHoweverManyScrapesCome) {
  int calls = 0;
  const MetricsSource once = snapshot_source(
      [&calls] {
        return MetricsFetch{true, "scrape " + std::to_string(++calls)};
      },
      std::chrono::hours(1));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(once().text, "scrape 1");
  EXPECT_EQ(calls, 1);
  const MetricsSource every = snapshot_source(
      [&calls] {
        return MetricsFetch{true, "scrape " + std::to_string(++calls)};
      },
      std::chrono::milliseconds(0));
  EXPECT_EQ(every().text, "scrape 2");
  EXPECT_EQ(every().text, "scrape 3");
}

/// A server on 127.0.0.1:0 serving in a thread until stop() (a pipe as its stop fd).
class ServedMetrics {
 public:
  ServedMetrics(MetricsSource source, ServeOptions options)
      : server_(*MetricsServer::listen("127.0.0.1:0")) {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    stop_read_ = UniqueFd(p[0]);
    stop_write_ = UniqueFd(p[1]);
    thread_ = std::thread([this, source = std::move(source), options] {
      result_ = server_.serve(source, options, stop_read_.get());
    });
  }
  ~ServedMetrics() { stop(); }
  ServedMetrics(const ServedMetrics&) = delete;
  ServedMetrics& operator=(const ServedMetrics&) = delete;

  std::error_code stop() {
    if (thread_.joinable()) {
      (void)::write(stop_write_.get(), "x", 1);
      thread_.join();
    }
    return result_;
  }
  [[nodiscard]] UniqueFd connect() const {
    const auto& a = server_.address();
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(a.substr(a.rfind(':') + 1))));
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) return {};
    return fd;
  }

 private:
  MetricsServer server_;
  UniqueFd stop_read_, stop_write_;
  std::error_code result_;
  std::thread thread_;
};

/// Everything the server sends on `fd` until it closes (30 s at most: a hang guard).
std::string read_until_closed(int fd) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return got;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got + "<not closed>";
}

bool send_text(int fd, std::string_view text) {
  return ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

/// Whether `fd` is still open from the server's side: nothing to read, no hang-up.
bool still_open(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

// Twenty clients connect and send nothing, a twenty-first sends half a request head; with a
// request-head deadline of a minute none of them is dropped, yet a scraper arriving after
// them is answered at once, and a client that sends its request in two pieces is answered
// too. Served one at a time, the scraper would wait out the first staller's minute.
TEST(MetricsHttp, ClientsAreServedSideBySideNotBehindOneAnother) {
  int calls = 0;
  ServeOptions options;
  options.header_timeout = std::chrono::minutes(1);
  ServedMetrics served(
      [&calls] {
        return MetricsFetch{true, "m " + std::to_string(++calls) + "\n"};
      },
      options);
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 20; ++i) {
    silent.push_back(served.connect());
    ASSERT_TRUE(silent.back());
  }
  const UniqueFd half = served.connect();
  ASSERT_TRUE(send_text(half.get(), "GET /met"));

  const UniqueFd scraper = served.connect();
  ASSERT_TRUE(send_text(scraper.get(), "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::string reply = read_until_closed(scraper.get());
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0U) << reply;
  EXPECT_NE(reply.find("\r\n\r\nm 1\n"), std::string::npos) << reply;
  for (const auto& s : silent) EXPECT_TRUE(still_open(s.get()));
  EXPECT_TRUE(still_open(half.get()));

  ASSERT_TRUE(send_text(half.get(), "rics HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(read_until_closed(half.get()).rfind("HTTP/1.1 200 OK\r\n", 0), 0U);
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(served.stop()) << "the server stops cleanly at its stop fd";
}

// A client that sends nothing is dropped at the request-head deadline, and one that stops
// reading its answer at the write deadline, while the server goes on answering others.
TEST(MetricsHttp, SilentAndNonReadingClientsAreDroppedAtTheirDeadlines) {
  ServeOptions options;
  options.header_timeout = std::chrono::milliseconds(200);
  options.write_timeout = std::chrono::milliseconds(200);
  // An answer far larger than any socket buffer: a client that does not read cannot take it.
  const std::string big(32 << 20, 'x');
  ServedMetrics served([&big] { return MetricsFetch{true, big}; }, options);
  const UniqueFd silent = served.connect();
  const UniqueFd no_reader = served.connect();
  ASSERT_TRUE(send_text(no_reader.get(), "GET /metrics HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(read_until_closed(silent.get()), "") << "dropped without an answer";
  // Read what it sent so far: the connection ends before the whole answer came.
  const std::string partial = read_until_closed(no_reader.get());
  EXPECT_EQ(partial.rfind("HTTP/1.1 200 OK\r\n", 0), 0U);
  EXPECT_LT(partial.size(), big.size());
  const UniqueFd next = served.connect();
  ASSERT_TRUE(send_text(next.get(), "GET /nothing HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(read_until_closed(next.get()).rfind("HTTP/1.1 404 ", 0), 0U);
}

TEST(MetricsHttp, AUnixSocketIsMode0600AndRefusesToReplaceAnythingButASocket) {
  char dir_template[] = "/tmp/unetback-metrics-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  {
    auto s = MetricsServer::listen("unix:" + dir + "/m.sock");
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(s->address(), "unix:" + dir + "/m.sock");
    struct stat st {};
    ASSERT_EQ(::lstat((dir + "/m.sock").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600U);
    auto live = MetricsServer::listen("unix:" + dir + "/m.sock");
    ASSERT_FALSE(live);
    EXPECT_EQ(live.error(), std::errc::address_in_use);
  }
  struct stat st {};
  EXPECT_NE(::lstat((dir + "/m.sock").c_str(), &st), 0) << "removed with the server";
  { std::ofstream(dir + "/file") << "not a socket"; }
  auto refused = MetricsServer::listen("unix:" + dir + "/file");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), std::errc::file_exists);
  EXPECT_FALSE(MetricsServer::listen("unix:"));
  EXPECT_FALSE(MetricsServer::listen("unix:" + std::string(200, 'a')));
  ::unlink((dir + "/file").c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace unetback::ctl

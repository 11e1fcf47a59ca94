#include "backend/daemon/systemd_job.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

#include "common/util/log.hpp"

#if UNETBACK_HAVE_LIBSYSTEMD
#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>
#endif

namespace unetback::daemon {

bool systemd_restarting_us() {
#if UNETBACK_HAVE_LIBSYSTEMD
  // Only a service systemd started has a unit to ask about.
  // NOLINTNEXTLINE(concurrency-mt-unsafe): nothing in unetbackd ever sets the environment.
  if (std::getenv("INVOCATION_ID") == nullptr) return false;
  char* unit = nullptr;
  if (::sd_pid_get_unit(::getpid(), &unit) < 0 || unit == nullptr) return false;
  const std::string unit_name(unit);
  std::free(unit);  // NOLINT(cppcoreguidelines-no-malloc): sd_pid_get_unit's contract
  sd_bus* bus = nullptr;
  if (::sd_bus_open_system(&bus) < 0) return false;
  bool restarting = false;
  char* unit_path = nullptr;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  sd_bus_message* reply = nullptr;
  if (::sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit_name.c_str(), &unit_path) >= 0 &&
      ::sd_bus_get_property(bus, "org.freedesktop.systemd1", unit_path,
                            "org.freedesktop.systemd1.Unit", "Job", &error, &reply, "(uo)") >= 0) {
    std::uint32_t job_id = 0;
    const char* job_path = nullptr;
    if (::sd_bus_message_read(reply, "(uo)", &job_id, &job_path) >= 0 && job_id != 0) {
      char* type = nullptr;
      sd_bus_error e2 = SD_BUS_ERROR_NULL;
      if (::sd_bus_get_property_string(bus, "org.freedesktop.systemd1", job_path,
                                       "org.freedesktop.systemd1.Job", "JobType", &e2,
                                       &type) >= 0 &&
          type != nullptr) {
        restarting = std::strcmp(type, "restart") == 0 || std::strcmp(type, "try-restart") == 0;
        std::free(type);  // NOLINT(cppcoreguidelines-no-malloc)
      }
      ::sd_bus_error_free(&e2);
    }
  }
  if (error.message != nullptr) {
    log::write(log::Level::warn, "unetbackd",
               std::string("asking systemd about our job: ") + error.message);
  }
  ::sd_bus_message_unref(reply);
  ::sd_bus_error_free(&error);
  std::free(unit_path);  // NOLINT(cppcoreguidelines-no-malloc)
  ::sd_bus_unref(bus);
  return restarting;
#else
  return false;
#endif
}

}  // namespace unetback::daemon

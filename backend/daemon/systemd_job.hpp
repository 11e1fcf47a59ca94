// Whether systemd is restarting the unit this daemon runs in (`systemctl restart unetbackd`,
// or `try-restart`/`reload-or-restart`): a SIGTERM then means "a successor follows", and the
// daemon hands its vifs over (issue 20) instead of closing them.
//
// The decision rests on the manager's own answer, never on a guess: over sd-bus the unit's
// `Job` property names its pending job, whose `JobType` is "restart" (systemd queues one
// restart job and stops the old process as its first half). Outside systemd, without
// libsystemd or when the bus cannot be asked, the answer is false: SIGTERM stays an orderly
// stop that closes every vif (state 6), as it always was.
#pragma once

namespace unetback::daemon {

[[nodiscard]] bool systemd_restarting_us();

}  // namespace unetback::daemon

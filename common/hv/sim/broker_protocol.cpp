#include "common/hv/sim/broker_protocol.hpp"

namespace unetback::hv::sim {

std::string_view broker_op_name(BrokerOp op) {
  switch (op) {
    case BrokerOp::register_dom0: return "REGISTER_DOM0";
    case BrokerOp::create_domain: return "CREATE_DOMAIN";
    case BrokerOp::register_domain: return "REGISTER_DOMAIN";
    case BrokerOp::claim_domain: return "CLAIM_DOMAIN";
    case BrokerOp::destroy_domain: return "DESTROY_DOMAIN";
    case BrokerOp::get_domain_memory: return "GET_DOMAIN_MEMORY";
    case BrokerOp::evtchn_alloc_unbound: return "EVTCHN_ALLOC_UNBOUND";
    case BrokerOp::evtchn_bind_interdomain: return "EVTCHN_BIND_INTERDOMAIN";
    case BrokerOp::evtchn_unbind: return "EVTCHN_UNBIND";
    case BrokerOp::evtchn_peer: return "EVTCHN_PEER";
    case BrokerOp::domain_exists: return "DOMAIN_EXISTS";
    case BrokerOp::fault_revoke_grant: return "FAULT_REVOKE_GRANT";
    case BrokerOp::fault_corrupt_grant: return "FAULT_CORRUPT_GRANT";
    case BrokerOp::fault_drop_events: return "FAULT_DROP_EVENTS";
    case BrokerOp::fault_stall_domain: return "FAULT_STALL_DOMAIN";
    case BrokerOp::restrict_client: return "RESTRICT_CLIENT";
  }
  return "UNKNOWN";
}

}  // namespace unetback::hv::sim

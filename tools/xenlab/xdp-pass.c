// xdp-pass: attaches (or detaches) a minimal XDP program to a network device in native
// (driver) mode, for the lab's domU: no BPF toolchain, no libbpf, no iproute2 with BPF support.
//
//   xdp-pass attach IFNAME   load "r0 = XDP_PASS; exit" (bpf(2) BPF_PROG_LOAD, type XDP,
//                            license GPL) and set it on IFNAME (RTM_SETLINK, IFLA_XDP_FD)
//   xdp-pass detach IFNAME   set IFLA_XDP_FD -1 on IFNAME
//
// Driver mode (XDP_FLAGS_DRV_MODE) on purpose: generic XDP never reaches the driver, and it is
// xen-netfront's ndo_bpf (xennet_xdp_set) that asks its backend for XDP headroom through the
// xenbus states Reconfiguring / Reconfigured. Built static on the host (gcc -static).
// Exit status: 0 done, 1 the kernel refused (its error printed), 2 usage.
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int load_pass_program(void) {
  // BPF_MOV64_IMM(BPF_REG_0, XDP_PASS); BPF_EXIT_INSN()
  struct bpf_insn insns[2];
  memset(insns, 0, sizeof insns);
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[0].dst_reg = BPF_REG_0;
  insns[0].imm = XDP_PASS;
  insns[1].code = BPF_JMP | BPF_EXIT;

  static char log[4096];
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.prog_type = BPF_PROG_TYPE_XDP;
  attr.insns = (unsigned long)insns;
  attr.insn_cnt = 2;
  attr.license = (unsigned long)"GPL";
  attr.log_buf = (unsigned long)log;
  attr.log_size = sizeof log;
  attr.log_level = 1;
  const int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
  if (fd < 0) fprintf(stderr, "xdp-pass: BPF_PROG_LOAD: %s\n%s", strerror(errno), log);
  return fd;
}

// Appends one attribute to the message in `buf` (its nlmsg_len grows); returns its start.
static struct rtattr* add_attr(struct nlmsghdr* n, size_t cap, unsigned short type,
                               const void* data, size_t len) {
  const size_t at = NLMSG_ALIGN(n->nlmsg_len);
  if (at + RTA_SPACE(len) > cap) return NULL;
  struct rtattr* rta = (struct rtattr*)((char*)n + at);
  rta->rta_type = type;
  rta->rta_len = (unsigned short)RTA_LENGTH(len);
  if (len) memcpy(RTA_DATA(rta), data, len);
  n->nlmsg_len = (unsigned)(at + RTA_ALIGN(rta->rta_len));
  return rta;
}

static int set_xdp_fd(int ifindex, int prog_fd) {
  union {
    struct nlmsghdr n;
    char buf[256];
  } req;
  memset(&req, 0, sizeof req);
  req.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
  req.n.nlmsg_type = RTM_SETLINK;
  req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req.n.nlmsg_seq = 1;
  struct ifinfomsg* ifi = NLMSG_DATA(&req.n);
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = ifindex;

  struct rtattr* xdp = add_attr(&req.n, sizeof req, IFLA_XDP | NLA_F_NESTED, NULL, 0);
  const unsigned flags = XDP_FLAGS_DRV_MODE;
  if (!xdp || !add_attr(&req.n, sizeof req, IFLA_XDP_FD, &prog_fd, sizeof prog_fd) ||
      !add_attr(&req.n, sizeof req, IFLA_XDP_FLAGS, &flags, sizeof flags)) {
    fprintf(stderr, "xdp-pass: netlink message too long\n");
    return -1;
  }
  xdp->rta_len = (unsigned short)((char*)&req.n + req.n.nlmsg_len - (char*)xdp);

  const int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (s < 0) {
    fprintf(stderr, "xdp-pass: netlink socket: %s\n", strerror(errno));
    return -1;
  }
  const int one = 1;
  (void)setsockopt(s, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  if (sendto(s, &req, req.n.nlmsg_len, 0, (struct sockaddr*)&kernel, sizeof kernel) < 0) {
    fprintf(stderr, "xdp-pass: netlink send: %s\n", strerror(errno));
    close(s);
    return -1;
  }
  char ans[8192];
  const ssize_t got = recv(s, ans, sizeof ans, 0);
  close(s);
  if (got < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
    fprintf(stderr, "xdp-pass: netlink answer: %s\n", got < 0 ? strerror(errno) : "too short");
    return -1;
  }
  const struct nlmsghdr* h = (const struct nlmsghdr*)ans;
  if (h->nlmsg_type != NLMSG_ERROR) {
    fprintf(stderr, "xdp-pass: unexpected netlink answer type %u\n", h->nlmsg_type);
    return -1;
  }
  const struct nlmsgerr* e = NLMSG_DATA(h);
  if (e->error == 0) return 0;
  fprintf(stderr, "xdp-pass: RTM_SETLINK IFLA_XDP: %s", strerror(-e->error));
  // The extended ack's message (NLMSGERR_ATTR_MSG), when the kernel gave one.
  if (h->nlmsg_flags & NLM_F_ACK_TLVS) {
    const size_t echoed = (h->nlmsg_flags & NLM_F_CAPPED) ? 0 : e->msg.nlmsg_len - NLMSG_HDRLEN;
    const size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nlmsgerr) + echoed);
    for (size_t at = off; at + sizeof(struct rtattr) <= (size_t)got && at < h->nlmsg_len;) {
      const struct rtattr* a = (const struct rtattr*)(ans + at);
      if (a->rta_len < sizeof(struct rtattr)) break;
      if (a->rta_type == NLMSGERR_ATTR_MSG)
        fprintf(stderr, " (%.*s)", (int)RTA_PAYLOAD(a), (const char*)RTA_DATA(a));
      at += RTA_ALIGN(a->rta_len);
    }
  }
  fprintf(stderr, "\n");
  return -1;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "attach") != 0 && strcmp(argv[1], "detach") != 0)) {
    fprintf(stderr, "usage: xdp-pass attach|detach IFNAME\n");
    return 2;
  }
  const int ifindex = (int)if_nametoindex(argv[2]);
  if (ifindex == 0) {
    fprintf(stderr, "xdp-pass: %s: %s\n", argv[2], strerror(errno));
    return 1;
  }
  int fd = -1;
  if (strcmp(argv[1], "attach") == 0) {
    fd = load_pass_program();
    if (fd < 0) return 1;
  }
  if (set_xdp_fd(ifindex, fd) != 0) return 1;
  printf("xdp-pass: %s %s: done\n", argv[1], argv[2]);
  return 0;
}

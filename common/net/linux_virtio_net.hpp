// <linux/virtio_net.h> for C++. The header names a struct member `class`
// (struct virtio_net_ctrl_hdr, unused here), which is not valid C++: pull in the headers it
// includes first, then rename the word only while virtio_net.h itself is read. GCC and Clang
// accept this; the macro is gone before any other code is seen.
#pragma once

// clang-format off
#include <linux/if_ether.h>
#include <linux/types.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_types.h>
#define class virtio_net_ctrl_class
#include <linux/virtio_net.h>
#undef class
// clang-format on

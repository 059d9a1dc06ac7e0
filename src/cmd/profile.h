/*
 * profile.h: the `profile` command's table row (cmd/profile.c).
 */
#ifndef MF_PROFILE_H
#define MF_PROFILE_H

#include "cmd/cmd.h"

extern const mf_cmd_def_t mf_cmds_profile[];

#endif /* MF_PROFILE_H */

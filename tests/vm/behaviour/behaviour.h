/* What the behaviour programs share: the event channel, a call's printed
 * result, the next event expected, an IPv4 address from the command line,
 * and a client's address and route resolution. Every line printed here is
 * part of the output 67-dropin-behaviour compares, kernel CM against uscm. */
#ifndef USCM_TESTS_VM_BEHAVIOUR_BEHAVIOUR_H_
#define USCM_TESTS_VM_BEHAVIOUR_BEHAVIOUR_H_

#include <netinet/in.h>

#include <rdma/rdma_cma.h>

/* The program's one event channel (created by main). */
extern struct rdma_event_channel* ch;

/* Prints "WHAT: rc RC errno NAME" and returns rc. */
int call(const char* what, int rc);
/* call(), and exits the program when rc != 0. */
void must(const char* what, int rc);

/* The channel's next event, printed ("event NAME status N"); the program
 * exits when there is none or it is not `want`. The caller acks it. */
struct rdma_cm_event* expect(enum rdma_cm_event_type want);

/* A new RDMA_PS_TCP id on `ch`; exits the program when there is none. */
struct rdma_cm_id* new_id(void);

/* An RC QP's init attributes: `wrs` send and receive work requests, one SGE
 * each, no CQs (rdma_create_qp creates them). */
struct ibv_qp_init_attr rc_qp_attr(int wrs);

/* IP and port as given on the command line; exits 2 when IP is no IPv4. */
struct sockaddr_in ipv4_arg(const char* ip, const char* port);

/* rdma_resolve_addr then rdma_resolve_route to `peer` (2 s each), their
 * calls printed with `indent` before the name, their events expected. */
void resolve_to(struct rdma_cm_id* id, struct sockaddr_in* peer, const char* indent);

#endif /* USCM_TESTS_VM_BEHAVIOUR_BEHAVIOUR_H_ */

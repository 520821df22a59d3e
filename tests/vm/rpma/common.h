/* tests/vm/rpma: a librpma server and client (built against <librpma.h> with -lrpma,
 * no uscm header) for tests/vm/groups/68-dropin-rpma.sh. What they print is the same on
 * the kernel CM and on uscm's drop-in librdmacm: no address, key or QP number. */
#ifndef USCM_TESTS_VM_RPMA_COMMON_H_
#define USCM_TESTS_VM_RPMA_COMMON_H_

#include <librpma.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RPMA_BUF_SIZE 4096 /* the server's buffer per connection */
#define RPMA_MSG_SIZE 64   /* a message either way */
#define RPMA_TAG_MAX 16    /* a client's tag, NUL included */

/* die_rpma: prints "WHAT: librpma's error" and exits 1 when RET is not 0 */
void die_rpma(int ret, const char *what);
/* die: prints the message and exits 1 */
void die(const char *what);

/* server_pattern / client_pattern: byte I of the server's buffer as it registers it, and
 * of what the client with TAG writes over it */
uint8_t server_pattern(size_t i);
uint8_t client_pattern(const char *tag, size_t i);
/* pattern_mismatch: the first index where BUF differs from the pattern (SIZE if none) */
size_t server_mismatch(const uint8_t *buf, size_t size);
size_t client_mismatch(const char *tag, const uint8_t *buf, size_t size);
/* fnv1a: a 32-bit digest of BUF, printed so two runs can be compared */
uint32_t fnv1a(const uint8_t *buf, size_t size);

/* set_nonblock: O_NONBLOCK on FD, as librpma's examples set it on the fds they epoll */
void set_nonblock(int fd);

/* next_event: polls the connection's event fd (rpma_conn_get_event_fd) until readable,
 * then returns rpma_conn_next_event's event */
enum rpma_conn_event next_event(struct rpma_conn *conn);
/* expect_event: next_event, which must be WANT; prints "PREFIX event NAME" */
void expect_event(struct rpma_conn *conn, enum rpma_conn_event want, const char *prefix);
/* next_wc: waits on CQ (rpma_cq_wait) until it gives one completion, returned in WC;
 * exits 1 on an error status */
void next_wc(struct rpma_cq *cq, struct ibv_wc *wc);
/* next_wc_shared: the next completion of CONN's CQ or receive CQ, which share one
 * completion channel (rpma_conn_wait); exits 1 on an error status */
void next_wc_shared(struct rpma_conn *conn, struct ibv_wc *wc);

#endif /* USCM_TESTS_VM_RPMA_COMMON_H_ */

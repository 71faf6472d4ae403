/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_list.h
 *		Intrusive doubly-linked lists for the lock manager: O(1) insert at
 *		the tail and delete anywhere, no allocation.
 *
 * Interface: dlm_list_init, dlm_list_empty, dlm_list_push_tail,
 * dlm_list_delete, dlm_list_insert_after, dlm_list_head, dlm_list_tail,
 * dlm_list_next, dlm_list_prev, DLM_CONTAINER.
 */
#ifndef DLOCK_LIST_H
#define DLOCK_LIST_H

#include <stddef.h>
#include <stdbool.h>

typedef struct DLmLink
{
	struct DLmLink *prev;
	struct DLmLink *next;
} DLmLink;

/* A circular list around a sentinel. */
typedef struct DLmList
{
	DLmLink		head;
} DLmList;

#define DLM_CONTAINER(type, field, link) \
	((type *) ((char *) (link) - offsetof(type, field)))

static inline void
dlm_list_init(DLmList *l)
{
	l->head.prev = l->head.next = &l->head;
}

static inline bool
dlm_list_empty(const DLmList *l)
{
	return l->head.next == &l->head;
}

static inline void
dlm_list_push_tail(DLmList *l, DLmLink *x)
{
	x->prev = l->head.prev;
	x->next = &l->head;
	l->head.prev->next = x;
	l->head.prev = x;
}

static inline void
dlm_list_delete(DLmLink *x)
{
	x->prev->next = x->next;
	x->next->prev = x->prev;
	x->prev = x->next = NULL;
}

/* Insert x right after 'at' (a link of the list, or its sentinel &l->head). */
static inline void
dlm_list_insert_after(DLmLink *at, DLmLink *x)
{
	x->prev = at;
	x->next = at->next;
	at->next->prev = x;
	at->next = x;
}

/* Last link, or NULL. */
static inline DLmLink *
dlm_list_tail(const DLmList *l)
{
	return dlm_list_empty(l) ? NULL : l->head.prev;
}

/* The link before x, or NULL at the start. */
static inline DLmLink *
dlm_list_prev(const DLmList *l, const DLmLink *x)
{
	return x->prev == &l->head ? NULL : x->prev;
}

/* First link, or NULL. */
static inline DLmLink *
dlm_list_head(const DLmList *l)
{
	return dlm_list_empty(l) ? NULL : l->head.next;
}

/* The link after x, or NULL at the end. */
static inline DLmLink *
dlm_list_next(const DLmList *l, const DLmLink *x)
{
	return x->next == &l->head ? NULL : x->next;
}

#endif							/* DLOCK_LIST_H */

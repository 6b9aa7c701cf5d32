"""The engine's session and loop tests, run unchanged on both stores: NBAGENT_STORE points ``Session.open`` at PostgreSQL.

The tests are imported from tests/agent/test_session.py, test_loop.py and test_deltas.py; this module's
``log_path`` fixture makes each run once per store.  Tests about files (torn tails, fsync order,
snapshot files, offsets on disk, fault-injecting file operations) stay file-only in their own modules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.test_deltas import (  # noqa: F401 - collected here, once per store
    flusher,
    test_a_broken_stream_drops_an_unfinished_key_alphabet_run,
    test_a_closed_writer_is_not_flushed_later,
    test_a_reply_cut_within_the_interval_keeps_what_came,
    test_a_reply_that_ends_within_the_interval_is_left_to_its_assistant_msg,
    test_pieces_within_the_interval_become_one_line_per_block,
    test_the_flusher_writes_a_stalled_stream_after_the_interval,
)
from tests.agent.test_loop import (  # noqa: F401
    effects,
    session,
    test_auto_never_repeats_a_write_of_unknown_outcome,
    test_bad_request_raises_is_logged_and_the_session_stays_resumable,
    test_completed_call_is_not_rerun_and_recorded_messages_are_sent_verbatim,
    test_completed_turn_is_not_requested_again,
    test_cut_off_stream_is_discarded_and_requested_again,
    test_dangling_call_without_tool_started_runs,
    test_interrupt_while_the_reply_streams_is_logged_and_the_call_is_made_again,
    test_interrupt_while_waiting_for_approval_asks_again_on_resume,
    test_irreversible_tool_asks_before_it_runs,
    test_key_is_stable_across_an_interrupt_and_a_new_process_view,
    test_keyboard_interrupt_in_a_tool_is_logged_and_the_next_run_continues,
    test_loop_gives_up_after_its_retries_and_the_session_can_resume,
    test_new_prompt_answers_open_calls_first_so_the_history_stays_valid,
    test_parallel_tool_calls_answered_in_one_user_message_in_order,
    test_plain_text_turn,
    test_started_keyed_call_runs_again_with_the_recorded_key,
    test_started_read_call_runs_again,
    test_started_unkeyed_write_is_not_repeated_when_declined,
    test_started_unkeyed_write_runs_again_when_approved,
    test_tool_turn,
    test_trailing_user_turn_calls_the_model,
    test_usage_totals_are_the_sum_over_replies,
    tools,
)
from tests.agent.test_session import (  # noqa: F401
    test_a_subscriber_joining_ahead_of_the_log_gets_only_later_events,
    test_a_subscriber_that_appends_from_its_callback_keeps_every_subscriber_in_order,
    test_a_subscriber_that_unsubscribes_itself_and_then_raises,
    test_close_detaches_subscribers,
    test_snapshot_bodies_reuse_encoded_messages_but_never_a_replaced_one,
    test_unsubscribe,
)
from tests.support.store_fixtures import STORES, use_store


@pytest.fixture(params=STORES)
def log_path(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where a test's session goes: a file, or (NBAGENT_STORE set) the same name in the database."""
    use_store(request.param, monkeypatch)
    return tmp_path / "session.jsonl"

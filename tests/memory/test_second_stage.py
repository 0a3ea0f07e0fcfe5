"""The second stage of HYBRID search (``memory.search.second_stage``): each signal on its own, the weighted
score, and the pool search reads (``ranking.candidate_pool``)."""

import dataclasses
import datetime as dt

import pytest

from memory.search import dates
from memory.search import second_stage as st
from memory.search.dates import Span
from memory.search.second_stage import Candidate, Weights

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def at(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(day).replace(tzinfo=UTC)


def only(name: str, value: float = 1.0) -> Weights:
    """Weights that count one signal."""
    return Weights(**{**{field: 0.0 for field in st.SIGNALS}, name: value})


# --- words ---------------------------------------------------------------------------------------------


def test_stem_matches_inflections_both_sides():
    assert st.stem("Paintings") == st.stem("painting") == st.stem("painted") == st.stem("paint") == "paint"
    assert st.stem("making") == st.stem("make") == st.stem("makes")
    assert st.stem("running") == st.stem("run") and st.stem("called") == st.stem("call")
    assert st.stem("Caroline's") == st.stem("Caroline") == st.stem("caroline\u2019s")
    assert st.stem("hobbies") == "hobby"
    assert st.stem("glass") == "glass"  # a double s is no plural
    assert st.stem("is") == "is"  # short words stay


def test_query_entities_are_capitalised_words_past_the_first_less_speakers_months_and_stopwords():
    q = "When did Caroline go to the LGBTQ Pride parade in June?"
    assert st.query_entities(q, speakers={"Caroline", "Melanie"}) == {"lgbtq", st.stem("Pride")}
    assert st.query_entities(q) == {st.stem("Caroline"), "lgbtq", st.stem("Pride")}
    assert st.query_entities("What did I say about Tokyo?") == {"tokyo"}
    assert st.query_entities("Where did Caroline's brother go?", speakers={"Caroline"}) == set()
    assert st.query_entities("what food does the user like?") == set()


def test_speaker_named_ignores_generic_and_unnamed_roles():
    words = {"what", "did", "melanie", "say", "user"}
    assert st.speaker_named(words, "Melanie")
    assert not st.speaker_named(words, "user")  # a position in a chat, not a person
    assert not st.speaker_named(words, "Caroline")
    assert not st.speaker_named(words, None)


# --- dates ---------------------------------------------------------------------------------------------


def test_query_spans_read_days_months_years_and_months_alone():
    assert dates.query_spans("What did Gina find on 1 February, 2023?", NOW) == [
        Span(dt.date(2023, 2, 1), dt.date(2023, 2, 1))]
    assert dates.query_spans("What painting did she show on October 13, 2023?", NOW) == [
        Span(dt.date(2023, 10, 13), dt.date(2023, 10, 13))]
    assert dates.query_spans("What setback did she face in October 2023?", NOW) == [
        Span(dt.date(2023, 10, 1), dt.date(2023, 10, 31))]
    assert dates.query_spans("When did Melanie go camping in June?", NOW) == [Span(month=6)]
    assert dates.query_spans("How many times has she gone to the beach in 2023?", NOW) == [
        Span(dt.date(2023, 1, 1), dt.date(2023, 12, 31))]
    assert dates.query_spans("What may she like?", NOW) == []  # "may" the verb is no month
    assert dates.query_spans("what food does the user like?", NOW) == []


def test_dates_in_digits_name_their_day():
    """REALTALK asks "What physical activity did Kevin do on 23.01.2024?": read as the year alone, the date
    signal marked every message of 2024 (issue #31)."""
    day = Span(dt.date(2024, 1, 23), dt.date(2024, 1, 23))
    assert dates.query_spans("What physical activity did Kevin do on 23.01.2024?", NOW) == [day]
    assert dates.query_spans("What happened on 2024-01-23?", NOW) == [day]
    assert dates.query_spans("and on 2024/1/23", NOW) == [day]
    assert dates.query_spans("What did she cook on 01/23/2024?", NOW) == [day]  # no 23rd month: US order
    assert dates.query_spans("What did she cook on 23/01/2024?", NOW) == [day]
    assert dates.query_spans("on 12-25-2024", NOW) == [Span(dt.date(2024, 12, 25), dt.date(2024, 12, 25))]
    # A slash or hyphen does not tell the order when both numbers fit a month: both days.
    assert dates.query_spans("What did we do on 03/04/2024?", NOW) == [
        Span(dt.date(2024, 3, 4), dt.date(2024, 3, 4)), Span(dt.date(2024, 4, 3), dt.date(2024, 4, 3))]
    # Dots are day-first only: 3 April.
    assert dates.query_spans("on 3.4.2024", NOW) == [Span(dt.date(2024, 4, 3), dt.date(2024, 4, 3))]
    # An ISO date and time: its day.
    assert dates.query_spans("since 2024-01-23T10:00", NOW) == [day]
    # A range in digits: the days from one to the other.
    january = [Span(dt.date(2024, 1, 1), dt.date(2024, 1, 31))]
    assert dates.query_spans("What happened 2024-01-01/2024-01-31?", NOW) == january
    assert dates.query_spans("What happened 2024-01-01--2024-01-31?", NOW) == january
    assert dates.query_spans("and 1.1.2024-31.1.2024", NOW) == january
    # A date form no calendar day fits, and longer or odder runs of numbers, name no day and no year (an
    # outside attack: each of these marked the whole of 2024). Two numbers are no date: the years stay.
    for no_day in ("31.02.2024", "29.02.2023", "2024-13-01", "555-12-2024", "192.168.1.2024", "10.1.2024.5",
                   "123.01.2024", "1.2.3.4.2024"):
        assert dates.query_spans(f"What happened on {no_day}?", NOW) == [], no_day
    assert dates.query_spans("in 2023-2024", NOW) == [
        Span(dt.date(2023, 1, 1), dt.date(2023, 12, 31)), Span(dt.date(2024, 1, 1), dt.date(2024, 12, 31))]
    assert dates.query_spans("at 12.30 in 2024", NOW) == [Span(dt.date(2024, 1, 1), dt.date(2024, 12, 31))]
    # A number too long to be a count of days is none (int() refuses over 4,300 digits: a 500 once).
    assert dates.query_spans("cat " + "5" * 4301 + " days ago", NOW) == []
    assert dates.relative_spans("last year, 100 years ago, yesterday", dt.date(1, 1, 5)) == [
        (dt.date(1, 1, 4), dt.date(1, 1, 4))]  # before year 1 there is no day: those are left out
    # A query of nothing but dates reads at most MAX_SPANS of them (6,500 years once took 2.2 s to read).
    for flood in ("2024 " * 6500, "2024-01-23 " * 2900, "June 2023 " * 3200, "1 May, 2023 " * 2700):
        assert len(dates.query_spans(flood, NOW)) == dates.MAX_SPANS
    assert len(dates.query_spans("1/2/2024 " * 3600, NOW)) == 2 * dates.MAX_SPANS
    # Relative times count from the day the query names.
    assert dates.query_spans("What did he do the day before 23.01.2024?", NOW)[0] == day


def test_a_day_in_digits_ranks_that_days_record_first():
    q = "What physical activity did Kevin do on 23.01.2024?"
    other = Candidate(key=("message", "other"), role="Kevin", content="a tough workout, then tea",
                      when=at("2024-01-16T18:00"), rrf=0.3)
    that_day = Candidate(key=("message", "that_day"), role="Kevin", content="I started the morning with yoga",
                         when=at("2024-01-23T09:00"), rrf=0.1)
    pool = [other, that_day]
    st.signals(pool, q, NOW)
    assert [c.signals["date"] for c in pool] == [0.0, 1.0]  # before: 1.0 for both (the year 2024)
    assert st.rank(pool, q, NOW)[0][0] == ("message", "that_day")


def test_relative_times_in_a_query_are_seen_from_its_own_date_else_from_now():
    spans = dates.query_spans("What did Maria do last weekend before April 10, 2023?", NOW)
    assert Span(dt.date(2023, 4, 2), dt.date(2023, 4, 9)) in spans
    assert dates.query_spans("What did I cook yesterday?", NOW) == [Span(dt.date(2026, 12, 1), dt.date(2026, 12, 1))]


def test_relative_spans_of_a_record():
    day = dt.date(2023, 5, 8)
    assert dates.relative_spans("I went to a support group yesterday", day) == [(dt.date(2023, 5, 7),) * 2]
    assert dates.relative_spans("last month we moved", day) == [(dt.date(2023, 4, 1), dt.date(2023, 4, 30))]
    assert dates.relative_spans("Last year I ran a marathon", day) == [(dt.date(2022, 1, 1), dt.date(2022, 12, 31))]
    (start, end), = dates.relative_spans("we met two weeks ago", day)
    assert start < day - dt.timedelta(days=14) < end < day
    assert dates.relative_spans("nothing of time here", day) == []
    assert len(dates.relative_spans("yesterday " * 50, day)) == 8  # bounded


def test_date_match_uses_the_records_date_and_the_days_its_words_name():
    june = [Span(month=6)]
    assert dates.date_match(june, at("2023-06-27T10:00"), "we went camping")
    assert dates.date_match(june, at("2023-07-03T10:00"), "we went camping last week")  # 20-26 June
    assert not dates.date_match(june, at("2023-07-20T10:00"), "we went camping")
    assert not dates.date_match(june, None, "we went camping in June")  # no date of its own: no match
    assert not dates.date_match([], at("2023-06-27T10:00"), "anything")
    assert Span(month=12).meets(dt.date(2023, 11, 25), dt.date(2024, 1, 5))
    assert not Span(month=6).meets(dt.date(2023, 1, 1), dt.date(2023, 5, 31))


def test_when_signal_pairs_a_question_about_time_with_records_that_say_when():
    assert dates.asks_when("When did Caroline go to the support group?")
    assert dates.asks_when("  what date is the concert?") and dates.asks_when("How long ago did she move?")
    assert not dates.asks_when("What did Caroline do at the support group?")
    assert not dates.asks_when("Whenever I cook, what do I use?")
    assert dates.says_when("I went to a support group yesterday") and dates.says_when("We met in September")
    assert dates.says_when("see you on Friday") and dates.says_when("back in 2019") and dates.says_when("early in May")
    assert not dates.says_when("I love the support group") and not dates.says_when("I may go in the sun")
    said = Candidate(key=("message", "a"), content="I went there last week")
    plain = Candidate(key=("message", "b"), content="I went there with friends")
    st.signals([said, plain], "When did she go there?", NOW)
    assert (said.signals["when"], plain.signals["when"]) == (1.0, 0.0)
    st.signals([said, plain], "Who did she go there with?", NOW)
    assert said.signals["when"] == 0.0


# --- the signals and the score -----------------------------------------------------------------------


def test_arm_signals_are_normalised_per_query():
    a = Candidate(key=("message", "a"), similarity=0.8, text_bm25=4.0, rrf=0.3)
    b = Candidate(key=("message", "b"), similarity=0.4, text_bm25=1.0, rrf=0.15)
    c = Candidate(key=("message", "c"), similarity=None, text_bm25=0.0, rrf=0.1)
    st.signals([a, b, c], "anything at all", NOW)
    assert (a.signals["vector"], b.signals["vector"], c.signals["vector"]) == (1.0, 0.0, 0.0)
    assert (a.signals["text"], b.signals["text"], c.signals["text"]) == (1.0, 0.25, 0.0)
    assert (a.signals["rrf"], b.signals["rrf"]) == (1.0, 0.5)
    assert all(0.0 <= v <= 1.0 for x in (a, b, c) for v in x.signals.values())


def test_neighbour_credit_comes_from_turns_within_the_window_of_the_same_thread():
    own = Candidate(key=("message", "q"), thread_id="t", seq=5, text_bm25=0.0, similarity=0.2)
    answer = Candidate(key=("message", "a"), thread_id="t", seq=6, text_bm25=2.0, similarity=0.6)
    far = Candidate(key=("message", "f"), thread_id="t", seq=9, text_bm25=0.0, similarity=0.2)
    other = Candidate(key=("message", "o"), thread_id="u", seq=6, text_bm25=0.0, similarity=0.2)
    memory = Candidate(key=("memory", "m"), thread_id="t", text_bm25=0.0, similarity=0.2)
    st.signals([own, answer, far, other, memory], "camping", NOW)
    assert own.signals["neighbour"] == own.signals["neighbour_vector"] == 1.0  # two turns on each side
    assert far.signals["neighbour"] == far.signals["neighbour_vector"] == 0.0  # three turns away
    assert other.signals["neighbour"] == other.signals["neighbour_vector"] == 0.0  # another thread
    assert memory.signals["neighbour"] == 0.0  # a memory has no turns around it
    assert answer.signals["neighbour"] == answer.signals["neighbour_vector"] == 0.0  # not its own neighbour


def test_answer_signal_credits_the_reply_to_a_matching_question_by_another_speaker():
    question = Candidate(key=("message", "q"), thread_id="t", seq=5, role="Caroline",
                         content="How did the kids handle the accident?", text_bm25=2.0, similarity=0.9)
    reply = Candidate(key=("message", "r"), thread_id="t", seq=6, role="Melanie",
                      content="They were scared but we reassured them.", text_bm25=0.0, similarity=0.1)
    same_speaker = Candidate(key=("message", "s"), thread_id="t", seq=6, role="Caroline", content="x")
    after_statement = Candidate(key=("message", "a"), thread_id="t", seq=8, role="Melanie",
                                content="My receipt", text_bm25=0.0, similarity=0.1)
    statement = Candidate(key=("message", "b"), thread_id="t", seq=7, role="Caroline",
                          content="The kids handled the accident well.", text_bm25=2.0, similarity=0.9)
    two_back = Candidate(key=("message", "c"), thread_id="t", seq=7, role="Melanie", content="x")
    st.signals([question, reply, after_statement, statement], "How did the kids handle the accident?", NOW)
    assert reply.signals["answer"] == 1.0  # the best-matching question is just before it, asked by another
    assert question.signals["answer"] == 0.0  # nothing before it
    assert after_statement.signals["answer"] == 0.0  # what comes before is not a question
    st.signals([question, reply], "When did the kids handle the accident?", NOW)
    assert reply.signals["answer"] == 0.0  # a "when" question's evidence states the time, it is not a reply
    st.signals([question, same_speaker], "accident", NOW)
    assert same_speaker.signals["answer"] == 0.0  # a speaker does not answer their own question
    st.signals([question, two_back], "accident", NOW)
    assert two_back.signals["answer"] == 0.0  # only the turn just after
    # A question's words are not the reply's own: its weight stays below the record's own evidence.
    with pytest.raises(ValueError, match="answer"):
        Weights(rrf=0.5, answer=0.5)
    assert st.WEIGHTS.answer < st.WEIGHTS.rrf + st.WEIGHTS.text + st.WEIGHTS.vector


def test_novel_signal_is_low_for_a_turn_that_only_repeats_the_question():
    echo = Candidate(key=("message", "e"), role="Caroline", content="That's so nice! What pet do you have?")
    answer = Candidate(key=("message", "a"), role="Caroline",
                       content="Yup, I do: Oscar, my guinea pig. He's been great, "
                               "loves carrots, apples and naps all day.")
    st.signals([echo, answer], "What pet does Caroline have?", NOW)
    assert echo.signals["novel"] < 0.5 < answer.signals["novel"] <= 1.0
    assert answer.signals["novel"] == 1.0  # NOVEL_WORDS new words or more
    ranked = st.rank([echo, answer], "What pet does Caroline have?", NOW, only("novel"))
    assert ranked[0][0] == ("message", "a")
    memory = Candidate(key=("memory", "m"), content="Caroline has a guinea pig")
    st.signals([echo, memory], "What pet does Caroline have?", NOW)
    assert memory.signals["novel"] == 1.0  # a memory never repeats the question: no length penalty


def test_answer_signal_needs_the_questions_words_not_a_weak_likeness():
    question = Candidate(key=("message", "q"), thread_id="t", seq=1, role="assistant",
                         content="How do you like Lisbon?", text_bm25=0.0, similarity=0.3)
    reply = Candidate(key=("message", "r"), thread_id="t", seq=2, role="user",
                      content="I love the tram rides.", text_bm25=0.0, similarity=0.1)
    st.signals([question, reply], "Iceland capital", NOW)
    assert question.signals["vector"] == 1.0  # normalised over a pool of two
    assert reply.signals["answer"] == 0.0  # the question shares no word with the query


def test_session_signal_is_the_rest_of_the_sessions_best_matches():
    day = at("2023-05-08T13:56")
    strong = [Candidate(key=("message", f"s{i}"), thread_id="t", seq=i, when=day, rrf=r)
              for i, r in enumerate((1.0, 0.8, 0.6, 0.4))]
    pronoun = Candidate(key=("message", "p"), thread_id="t", seq=20, when=day, rrf=0.1,
                        content="They were scared but we reassured them.")
    alone = Candidate(key=("message", "a"), thread_id="u", seq=1, when=day, rrf=0.1)
    next_day = Candidate(key=("message", "n"), thread_id="t", seq=40, when=day + dt.timedelta(days=1), rrf=0.1)
    memory = Candidate(key=("memory", "m"), thread_id="t", rrf=0.05)
    st.signals([*strong, pronoun, alone, next_day, memory], "How did the kids handle the accident?", NOW)
    # The best SESSION_TOP others of its session, in rrf signals (rrf / the query's best), averaged.
    assert st.SESSION_TOP == 3
    assert pronoun.signals["session"] == pytest.approx((1.0 + 0.8 + 0.6) / 3)
    assert strong[0].signals["session"] == pytest.approx((0.8 + 0.6 + 0.4) / 3)  # never itself
    assert alone.signals["session"] == 0.0  # nothing else in its thread
    assert next_day.signals["session"] == 0.0  # same thread, another day: another session
    assert memory.signals["session"] == 1.0  # not a chat turn: never sunk below messages
    order = [key for key, _ in st.rank([*strong, alone, pronoun], "accident", NOW,
                                       Weights(rrf=1.0, speaker=0.0, session=0.75))]
    assert order.index(("message", "p")) < order.index(("message", "a"))  # same rrf, a matching session
    # The rest of a session's words are not the message's own: its weight stays below rrf's.
    with pytest.raises(ValueError, match="session"):
        Weights(rrf=0.5, session=0.5)
    assert st.WEIGHTS.session < st.WEIGHTS.rrf


def test_session_of_an_undated_message_is_its_thread():
    a = Candidate(key=("message", "a"), thread_id="t", seq=1, rrf=0.9)
    b = Candidate(key=("message", "b"), thread_id="t", seq=50, rrf=0.3)
    st.signals([a, b], "anything", NOW)
    assert b.signals["session"] == pytest.approx(1.0 / st.SESSION_TOP)
    assert st.session_key(a) == ("t", None)
    assert st.session_key(Candidate(key=("image", "i"), thread_id="t")) is None


def test_a_neighbours_words_never_count_as_much_as_the_records_own():
    for own, neighbour in ((0.5, 1.0), (0.5, 0.5), (0.0, 0.1)):
        with pytest.raises(ValueError, match="neighbour"):
            Weights(text=own, neighbour=neighbour)
        with pytest.raises(ValueError, match="neighbour_vector"):
            Weights(vector=own, neighbour_vector=neighbour)
    assert st.WEIGHTS.neighbour == 0 or st.WEIGHTS.neighbour < st.WEIGHTS.text
    assert st.WEIGHTS.neighbour_vector == 0 or st.WEIGHTS.neighbour_vector < st.WEIGHTS.vector
    # The turn that holds the words outranks the turn next to it, all else equal.
    own = Candidate(key=("message", "own"), thread_id="t", seq=1, text_bm25=3.0)
    next_to = Candidate(key=("message", "next"), thread_id="t", seq=2, text_bm25=0.0)
    weights = dataclasses.replace(only("text", 0.5), neighbour=0.49)
    ranked = st.rank([next_to, own], "camping", NOW, weights)
    assert [k for k, _ in ranked] == [("message", "own"), ("message", "next")]
    assert ranked[1][1] == pytest.approx(0.49)


def test_speaker_entity_and_date_signals_raise_the_record_that_has_them():
    q = "What did Melanie paint for the LGBTQ center in June 2023?"
    plain = Candidate(key=("message", "plain"), role="Caroline", content="I painted a sunset",
                      when=at("2023-06-10T10:00"), rrf=0.2)
    speaker = Candidate(key=("message", "speaker"), role="Melanie", content="I painted a lake",
                        when=at("2023-08-10T10:00"), rrf=0.1)
    entity = Candidate(key=("message", "entity"), role="Caroline", content="The LGBTQ center opened",
                       when=at("2023-08-10T10:00"), rrf=0.1)
    dated = Candidate(key=("message", "dated"), role="Caroline", content="I painted a lake",
                      when=at("2023-07-02T10:00"), rrf=0.1)  # ... but not its words: "last week" is absent
    pool = [plain, speaker, entity, dated]
    st.signals(pool, q, NOW)
    assert [c.signals["speaker"] for c in pool] == [0.0, 1.0, 0.0, 0.0]
    assert [c.signals["entity"] for c in pool] == [0.0, 0.0, 1.0, 0.0]
    assert [c.signals["date"] for c in pool] == [1.0, 0.0, 0.0, 0.0]
    for name, winner in (("speaker", "speaker"), ("entity", "entity")):
        weights = dataclasses.replace(only(name), rrf=1.0)
        assert st.rank(pool, q, NOW, weights)[0][0] == ("message", winner), name
    dated.content = "I painted a lake last week"  # said on 2 July: 19-30 June
    ranked = st.rank(pool, q, NOW, dataclasses.replace(only("date"), rrf=0.1))
    assert dated.signals["date"] == 1.0
    assert [k[1] for k, _ in ranked[:2]] == ["plain", "dated"]


def test_terms_signal_counts_the_querys_content_words_in_the_records_own_words():
    q = "What paintings did Melanie's kids make at the lake?"
    a = Candidate(key=("message", "a"), role="Melanie", content="The kids painted by the lake", thread_id="t", seq=1)
    b = Candidate(key=("message", "b"), role="Caroline", content="Melanie, what did the kids make?", thread_id="t",
                  seq=2)
    c = Candidate(key=("message", "c"), role="Caroline", content="Nothing in common")
    st.signals([a, b, c], q, NOW)
    # Content words: paint, kid, make, lake ("melanie" is a speaker, "s" a piece of "Melanie's").
    assert a.signals["terms"] == 0.75 and b.signals["terms"] == 0.5 and c.signals["terms"] == 0.0
    d = Candidate(key=("message", "d"), content="anything")
    st.signals([d], "what did he do?", NOW)  # stopwords only
    assert d.signals["terms"] == 0.0


def test_generic_roles_name_no_speaker_in_the_score():
    a = Candidate(key=("message", "a"), role="user", content="My receipt", rrf=0.2)
    b = Candidate(key=("message", "b"), role="assistant", content="I love pizza.", rrf=0.1)
    ranked = st.rank([a, b], "what food does the user like?", NOW)
    assert [k for k, _ in ranked] == [("message", "a"), ("message", "b")]
    assert a.signals["speaker"] == 0.0


def test_an_invalid_record_scores_below_a_valid_one_that_scores_the_same():
    old = Candidate(key=("memory", "old"), status="invalid", similarity=0.9, rrf=0.3, text_bm25=2.0)
    new = Candidate(key=("memory", "new"), status="valid", similarity=0.9, rrf=0.3, text_bm25=2.0)
    ranked = st.rank([old, new], "where does the user live?", NOW)
    assert [k for k, _ in ranked] == [("memory", "new"), ("memory", "old")]
    assert st.WEIGHTS.invalid < 1.0
    with pytest.raises(ValueError, match="invalid"):
        Weights(invalid=1.5)


def test_the_signals_are_the_weights_fields_and_signals_fills_each_one():
    """``SIGNALS`` is derived from ``Weights``: its fields but ``invalid``, in their order, which is the order
    ``score`` adds the terms in (so part of every score's last bits: pinned here); ``signals`` fills exactly
    those, and ``score`` is their weighted sum."""
    names = tuple(field.name for field in dataclasses.fields(Weights))
    assert names == (*st.SIGNALS, "invalid")
    assert st.SIGNALS == ("rrf", "vector", "text", "neighbour", "neighbour_vector", "terms", "speaker", "entity",
                          "date", "when", "novel", "answer", "session")
    pool = [Candidate(key=("message", "c1"), rrf=0.2, similarity=0.5, text_bm25=2.0, role="Caroline",
                      content="I went to the lake yesterday", when=at("2023-06-27"), thread_id="t", seq=1),
            Candidate(key=("memory", "k1"), rrf=0.1, similarity=0.4, content="Caroline likes lakes")]
    st.signals(pool, "When did Caroline go to the lake?", NOW)
    weights = dataclasses.replace(st.WEIGHTS, text=0.25, neighbour=0.1, entity=0.05)
    for c in pool:
        assert set(c.signals) == set(st.SIGNALS)
        assert st.score(c, weights) == pytest.approx(sum(getattr(weights, n) * c.signals[n] for n in st.SIGNALS))


def test_rank_keeps_scores_decreasing_and_ties_in_the_given_order():
    pool = [Candidate(key=("message", str(i)), rrf=0.1) for i in range(5)]
    ranked = st.rank(pool, "anything", NOW)
    assert [k for k, _ in ranked] == [c.key for c in pool]
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert st.rank([], "anything", NOW) == []


# --- the pool search reads -----------------------------------------------------------------------------


def test_candidate_pool_carries_arm_scores_and_the_columns_the_second_stage_reads(thread):
    from django.utils import timezone

    from memory.core.types import MemorySearchConfig
    from memory.embedders import get_embedder
    from memory.records.tenancy import get_project
    from memory.search import ranking
    from memory.search.request import CLIENT_SCOPE, build_request, resolve_scope

    thread.add_messages([
        {"role": "Caroline", "content": "Melanie, where did you go camping?", "id": "c1",
         "timestamp": "2023-06-27T10:00:00"},
        {"role": "Melanie", "content": "We camped by the lake last week.", "id": "m1",
         "timestamp": "2023-06-27T10:01:00"},
    ])
    thread.add_memory("Melanie likes camping", memory_id="k1")
    request = build_request("Where did Melanie go camping?", project_id=get_project(None).pk,
                            scope=resolve_scope(CLIENT_SCOPE, client=True, user_id="user-1"),
                            config=MemorySearchConfig(mode="HYBRID"))
    candidates, distances = ranking.candidate_pool(request, get_embedder().embed([request.query])[0],
                                                   timezone.now())
    by_id = {c.key[1].split(":", 1)[1]: c for c in candidates}
    assert set(by_id) == {"c1", "m1", "k1"}
    assert by_id["m1"].role == "Melanie" and by_id["m1"].seq == by_id["c1"].seq + 1
    assert by_id["m1"].when.date() == dt.date(2023, 6, 27)
    assert by_id["m1"].content == "We camped by the lake last week."
    assert by_id["k1"].content == "Melanie likes camping" and by_id["k1"].role is None
    assert by_id["c1"].text_bm25 > 0 and by_id["c1"].ranks["text"] >= 1
    assert all(c.similarity is not None and 0 < c.similarity <= 1 for c in candidates)
    assert by_id["k1"].thread_id == by_id["m1"].thread_id and by_id["k1"].status == "valid"
    assert set(distances) == {c.key for c in candidates}
    assert [c.rrf for c in candidates] == sorted((c.rrf for c in candidates), reverse=True)


def test_candidate_pool_reads_the_columns_by_name_whatever_their_order(thread, monkeypatch):
    """The pool's columns are read by name: reversed, each candidate gets the same values (read by position,
    a reversed order would put a message's status in its role and its content in its thread)."""
    from django.utils import timezone

    from memory.core.types import MemorySearchConfig
    from memory.embedders import get_embedder
    from memory.records.tenancy import get_project
    from memory.search import ranking
    from memory.search.request import CLIENT_SCOPE, build_request, resolve_scope

    thread.add_messages([{"role": "Caroline", "content": "Melanie, where did you go camping?", "id": "c1",
                          "timestamp": "2023-06-27T10:00:00"}])
    thread.add_memory("Melanie likes camping", memory_id="k1", timestamp="2023-06-28T09:00:00")
    request = build_request("Where did Melanie go camping?", project_id=get_project(None).pk,
                            scope=resolve_scope(CLIENT_SCOPE, client=True, user_id="user-1"),
                            config=MemorySearchConfig(mode="HYBRID"))
    vector, now = get_embedder().embed([request.query])[0], timezone.now()

    def pool():
        fields = ("key", "role", "content", "when", "thread_id", "seq", "status")
        return [tuple(getattr(c, name) for name in fields) for c in ranking.candidate_pool(request, vector, now)[0]]

    expected = pool()
    assert {row[0][0] for row in expected} == {"message", "memory"}
    assert all(row[1] is None for row in expected if row[0][0] == "memory")
    for name in ("MESSAGE_COLUMNS", "MEMORY_COLUMNS"):
        monkeypatch.setattr(ranking, name, dict(reversed(list(getattr(ranking, name).items()))))
    assert pool() == expected


# --- names a speaker goes by (REALTALK: the speaker "Emi" is Kate to the person she talks to) -------------


def said(role: str, content: str, seq: int, thread_id: str = "t1") -> Candidate:
    return Candidate(key=("message", f"{thread_id}:{seq}"), role=role, content=content, thread_id=thread_id, seq=seq)


def test_a_name_another_speaker_addresses_someone_by_is_that_speakers():
    pool = [said("elise", "Hey Kate! How was the class?", 1), said("Emi", "It was great, I made pasta.", 2),
            said("elise", "That looks amazing Kate.", 3), said("elise", "What about you, Kate?", 4)]
    assert st.speaker_aliases("What are Kate's hobbies?", pool) == {"Kate": "Emi"}
    assert st.speaker_aliases("what are kate's hobbies?", pool) == {}  # a lower-case word names nobody
    assert st.speaker_aliases("What did KATE cook?", pool) == {"KATE": "Emi"}  # the text matches in any case


def test_a_speaker_naming_themselves_votes_for_their_own_role():
    pool = [said("Paola", "Hello! My name is Vanessa, how may I help you?", 1), said("Kevin", "Hi Vanessa!", 2),
            said("Kevin", "Where do you study?", 3)]
    assert st.speaker_aliases("Where does Vanessa study?", pool) == {"Vanessa": "Paola"}


def test_a_place_or_a_person_only_mentioned_is_no_alias():
    pool = [said("elise", "I love Miami!", 1), said("Emi", "Miami is great.", 2),
            said("elise", "We drove to Miami, it was fun.", 3), said("elise", "My friend Sarah came too.", 4),
            said("elise", "Sarah and I went dancing.", 5)]
    assert st.speaker_aliases("When did Elise go to Miami with Sarah?", pool) == {}


def test_a_generic_role_takes_no_alias():
    pool = [said("user", "Thanks Claude!", 1), said("assistant", "You're welcome.", 2),
            said("user", "Bye Claude!", 3)]
    assert st.speaker_aliases("What did Claude recommend?", pool) == {}


def test_one_greeting_is_not_enough_and_a_split_vote_is_no_alias():
    once = [said("elise", "Hey Kate!", 1), said("Emi", "Hi!", 2)]
    assert st.speaker_aliases("What does Kate like?", once) == {}
    # two threads where "Kate" greets a different person each time: no clear owner
    split = [said("elise", "Hey Kate!", 1, "a"), said("Emi", "Hi!", 2, "a"), said("elise", "Thanks Kate!", 3, "a"),
             said("Bob", "Hey Kate!", 1, "b"), said("Ann", "Hi", 2, "b"), said("Bob", "Bye Kate!", 3, "b")]
    assert st.speaker_aliases("What does Kate like?", split) == {}


def test_an_alias_is_replaced_by_the_role_in_the_query_as_a_whole_word():
    assert st.with_aliases("What are Kate's hobbies? kate?", {"Kate": "Emi"}) == "What are Emi's hobbies? Emi?"
    assert st.with_aliases("Did Katelyn come?", {"Kate": "Emi"}) == "Did Katelyn come?"


def test_a_speaker_is_named_in_any_case():
    """REALTALK writes one speaker "elise" and its questions "Elise": the speaker signal and the query's terms
    treat both as one name."""
    query_words = {"what", "does", "elise", "like"}
    assert st.speaker_named(query_words, "elise") and st.speaker_named(query_words, "Elise")
    assert st.query_entities("What does Elise like?", ["elise"]) == set()


def test_search_finds_what_a_speaker_said_when_the_query_calls_them_by_the_name_they_are_addressed_by(client):
    """The ranking fault REALTALK's chat 1 met: asked about "Kate", the keyword arm filled the pool with the turns
    that greet Kate, and the turn where she (speaker "Emi") names her hobbies ranked below them."""
    thread = client.create_thread(thread_id="t-names", user_id="user-names", agent_id="agent-1")
    greetings = ["Hey Kate! How are you?", "Thanks Kate, talk soon!", "Hello Kate. How was your day?",
                 "Good night Kate!", "Wow Kate, that looks amazing!", "See you Kate!"]
    messages = []
    for i, text in enumerate(greetings):
        messages.append({"role": "elise", "content": text, "id": f"e{i}"})
        messages.append({"role": "Emi", "content": "Doing well, thank you!", "id": f"k{i}"})
    messages.append({"role": "Emi", "content": "In my free time I love cooking, skiing and hiking.", "id": "hobbies"})
    messages.append({"role": "elise", "content": "I mostly read and play basketball.", "id": "elise-hobbies"})
    thread.add_messages(messages)
    results = client.search("What are Kate's hobbies?", user_id="user-names", record_types=["message"],
                            max_results=5)
    assert results[0].record.id == "hobbies"
